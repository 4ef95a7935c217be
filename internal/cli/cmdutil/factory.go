package cmdutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	// Cloud and exec auth providers, so every kubeconfig kubectl accepts works here too.
	_ "k8s.io/client-go/plugin/pkg/client/auth"

	"github.com/capx-io/capx/internal/scheme"
	"github.com/capx-io/capx/internal/version"
)

// Factory hands commands their dependencies. Every function field builds its value on first
// call and caches it, so a command that never calls them (--help, completion, version
// --client) never reads a kubeconfig or contacts a cluster. Tests replace the fields.
type Factory struct {
	// IO are the streams.
	IO *IOStreams
	// ConfigFlags are kubectl's global flags (nil in tests that set the functions directly).
	ConfigFlags *genericclioptions.ConfigFlags
	// Color is --color.
	Color ColorMode
	// Name is the binary's name as a user types it ("kubectl captf"): messages that name a
	// command use it.
	Name string

	// RESTConfig is the kubeconfig's client configuration.
	RESTConfig func() (*rest.Config, error)
	// Client is a controller-runtime client with the toolkit's scheme.
	Client func() (client.WithWatch, error)
	// Kubernetes is a clientset, for what the typed client does not do (pod logs,
	// SelfSubjectReview).
	Kubernetes func() (kubernetes.Interface, error)
	// Namespace is -n, else the kubeconfig context's namespace, else "default".
	Namespace func() (string, error)
	// Clock is the time --wait followers and the commands' deadlines go by.
	Clock clock.WithTicker
}

// NewFactory returns a factory over kubectl's global flags; name is how the user invokes the
// binary ("kubectl captf").
func NewFactory(streams *IOStreams, name string) *Factory {
	flags := genericclioptions.NewConfigFlags(true)
	f := &Factory{IO: streams, ConfigFlags: flags, Color: ColorAuto, Name: name, Clock: clock.RealClock{}}
	userAgent := fmt.Sprintf("%s/%s", name, version.Get().Version)
	f.RESTConfig = sync.OnceValues(func() (*rest.Config, error) {
		home, _ := os.UserHomeDir()
		if err := KubeconfigProblem(ptr.Deref(flags.KubeConfig, ""), os.Getenv(clientcmd.RecommendedConfigPathEnvVar), home,
			os.Getenv("KUBERNETES_SERVICE_HOST") != "", fileExists); err != nil {
			return nil, err
		}
		cfg, err := flags.ToRESTConfig()
		if err != nil {
			return nil, kubeconfigError(err)
		}
		cfg = rest.CopyConfig(cfg)
		cfg.UserAgent = userAgent
		// A CLI talks to the API server in bursts (status lists every kind at once).
		cfg.QPS, cfg.Burst = 50, 100
		return cfg, nil
	})
	f.Client = sync.OnceValues(func() (client.WithWatch, error) {
		cfg, err := f.RESTConfig()
		if err != nil {
			return nil, err
		}
		return client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	})
	f.Kubernetes = sync.OnceValues(func() (kubernetes.Interface, error) {
		cfg, err := f.RESTConfig()
		if err != nil {
			return nil, err
		}
		return kubernetes.NewForConfig(cfg)
	})
	f.Namespace = sync.OnceValues(func() (string, error) {
		ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
		if err != nil {
			return "", kubeconfigError(err)
		}
		return ns, nil
	})
	return f
}

// KubeconfigProblem says why no kubeconfig would be read, before client-go falls back to
// http://localhost:8080 and the first request fails without naming the file that is missing:
// --kubeconfig (flag) names a file that does not exist; none of the files $KUBECONFIG (env)
// lists exists; or neither is set, ~/.kube/config (under home) does not exist, and the
// command does not run in a pod (inCluster), whose service account client-go would use.
func KubeconfigProblem(flag, env, home string, inCluster bool, exists func(string) bool) error {
	switch {
	case flag != "":
		if !exists(flag) {
			return fmt.Errorf("--kubeconfig %s: no such file", flag)
		}
	case env != "":
		for _, p := range filepath.SplitList(env) {
			if p != "" && exists(p) {
				return nil
			}
		}
		return fmt.Errorf("$KUBECONFIG is %s, and no such file exists: set it to your kubeconfig, or pass --kubeconfig", env)
	case !inCluster:
		def := filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
		if !exists(def) {
			return fmt.Errorf("no kubeconfig: %s does not exist and neither $KUBECONFIG nor --kubeconfig is set", def)
		}
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func kubeconfigError(err error) error {
	return fmt.Errorf("load the kubeconfig (--kubeconfig, $KUBECONFIG or ~/.kube/config): %w", err)
}

// Styles returns the styles for f.IO.Out under --color.
func (f *Factory) Styles() *Styles { return NewStyles(f.IO.Out, f.Color.Enabled(f.IO.OutTTY)) }

// ErrStyles returns the styles for f.IO.ErrOut under --color.
func (f *Factory) ErrStyles() *Styles { return NewStyles(f.IO.ErrOut, f.Color.Enabled(f.IO.ErrTTY)) }

// NewTestFactory returns a factory whose clients are c and cs and whose namespace is ns; any
// may be nil, and calling a nil one fails the command.
func NewTestFactory(streams *IOStreams, name string, cfg *rest.Config, c client.WithWatch, cs kubernetes.Interface, ns string) *Factory {
	noClient := errors.New("no client in this test")
	return &Factory{
		IO: streams, Color: ColorAuto, Name: name, Clock: clock.RealClock{},
		RESTConfig: func() (*rest.Config, error) {
			if cfg == nil {
				return nil, noClient
			}
			return cfg, nil
		},
		Client: func() (client.WithWatch, error) {
			if c == nil {
				return nil, noClient
			}
			return c, nil
		},
		Kubernetes: func() (kubernetes.Interface, error) {
			if cs == nil {
				return nil, noClient
			}
			return cs, nil
		},
		Namespace: func() (string, error) { return ns, nil },
	}
}

// Deps are what a command's Options take from the factory: the streams, the binary's name as
// typed (for messages that name commands) and the lazy client and namespace functions. Embed
// it in Options; tests set the functions directly.
type Deps struct {
	IO         *IOStreams
	Name       string
	Client     func() (client.WithWatch, error)
	Kubernetes func() (kubernetes.Interface, error)
	Namespace  func() (string, error)
	Clock      clock.WithTicker
}

// Deps returns the factory's dependencies for a command.
func (f *Factory) Deps() Deps {
	return Deps{IO: f.IO, Name: f.Name, Client: f.Client, Kubernetes: f.Kubernetes, Namespace: f.Namespace, Clock: f.Clock}
}

// Connect builds the client and reads the namespace: the first thing a command that talks to
// the cluster does, and the moment the kubeconfig is first read.
func (d Deps) Connect() (client.WithWatch, string, error) {
	c, err := d.Client()
	if err != nil {
		return nil, "", err
	}
	ns, err := d.Namespace()
	if err != nil {
		return nil, "", err
	}
	return c, ns, nil
}

// ConnectScope is Connect for a command that lists: the namespace to list in, or "" for every
// namespace when all (-A) is set, in which case the kubeconfig's namespace is not read.
func (d Deps) ConnectScope(all bool) (client.WithWatch, string, error) {
	if !all {
		return d.Connect()
	}
	c, err := d.Client()
	return c, "", err
}
