package captf_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/cli/captf"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	code := testenv.Run(m, testenv.Options{ControllerManager: true}, &env)
	if pluginDir != "" {
		_ = os.RemoveAll(pluginDir)
	}
	os.Exit(code)
}

// moduleImages maps the module images the tests use to the offline test modules.
func moduleImages(image string) (string, error) {
	for _, role := range []string{"machinepool", "machine", "cluster"} {
		if strings.Contains(image, "/"+role+":") {
			return filepath.Join(env.Root, "test", "modules", role), nil
		}
	}
	return "", fmt.Errorf("no test module for image %s", image)
}

// startManager runs the real manager (CAPTF only) for one namespace, with the kubelet
// stand-in running the real runner and OpenTofu for its Jobs' Pods.
func startManager(t *testing.T, ns string) {
	env.StartKubeletIn(t, ns, moduleImages)
	mgrtest.Start(t, env, "--providers=captf", "--drift-interval=0", "--namespace="+ns)
}

// result is one command's outcome.
type result struct {
	code        cmdutil.ExitCode
	out, errOut string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.errOut)
}

// decode parses -o json output.
func (r result) decode(t *testing.T, into any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.out), into); err != nil {
		t.Fatalf("decode %v: %v\n%s", into, err, r)
	}
}

type runOpts struct {
	user  string // impersonated user ("" for the admin)
	tty   bool
	stdin string
}

// run runs `kubectl captf args...` in namespace ns with captured streams.
func run(t *testing.T, ns string, o runOpts, args ...string) result {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	if o.user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: o.user, Groups: []string{"system:masters"}}
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	streams, in, out, errOut := cmdutil.TestIOStreams(o.tty)
	in.WriteString(o.stdin)
	f := cmdutil.NewTestFactory(streams, captf.Name, cfg, c, cs, ns)
	f.Color = cmdutil.ColorNever
	if o.tty {
		f.Color = cmdutil.ColorAlways
	}
	code := cmdutil.Execute(captf.NewRoot(f), streams, args)
	return result{code: code, out: out.String(), errOut: errOut.String()}
}

func vars(kv map[string]any) map[string]apiextensionsv1.JSON {
	out := make(map[string]apiextensionsv1.JSON, len(kv))
	for k, v := range kv {
		raw, _ := json.Marshal(v)
		out[k] = apiextensionsv1.JSON{Raw: raw}
	}
	return out
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

func noEscapes(t *testing.T, r result) {
	t.Helper()
	if bytes.Contains([]byte(r.out+r.errOut), []byte("\x1b[")) {
		t.Fatalf("colour codes without a terminal:\n%s", r)
	}
}
