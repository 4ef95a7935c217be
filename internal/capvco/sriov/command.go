package sriov

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/capx-io/capx/internal/capvco/ccm/config"
	"github.com/capx-io/capx/internal/vco"
)

const example = `  # On every worker, from the DaemonSet in namespace whitesky-sriov-cni (see
  # internal/capvco/sriov/manifests); NODE_NAME comes from the downward API:
  capvco-sriov-agent --node-name=$NODE_NAME --cloudspace-id=4b1e0c6a-... \
    --credentials-dir=/etc/capvco/sriov-credentials --external-network-id=7`

type options struct {
	credentialsDir string
	providerID     string
	nodeName       string
	kubeconfig     string
	cloudspaces    []string
	networks       []int
	socket         string
	stateDir       string
	installPlugin  string
	cniBinDir      string
	platform       config.Platform
}

// NewCommand is the capvco-sriov-agent command. It serves until ctx ends.
func NewCommand(ctx context.Context) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "capvco-sriov-agent",
		Short: "The node agent that attaches a whitesky.cloud NIC per Pod for the capvco-sriov CNI plugin",
		Long: `capvco-sriov-agent runs on every worker of a CAPVCO cluster with the SR-IOV add-on. When the
capvco-sriov CNI plugin asks (at a Pod's CNI ADD), it attaches a NIC on an external network to
this node's VM through the whitesky.cloud API and answers with the MAC and address the API
reports; at DEL it detaches it. It uses the credential of spec.sriov.credentialSecretRef, never
the cluster's. docs/capvco/sriov.md describes it and what a node can read.`,
		Example:       example,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          func(*cobra.Command, []string) error { return o.run(ctx) },
	}
	f := cmd.Flags()
	f.StringVar(&o.credentialsDir, "credentials-dir", "/etc/capvco/sriov-credentials", "the SR-IOV credential Secret mounted as files (url, customer, and jwt or clientID + clientSecret + iamURL)")
	f.StringVar(&o.providerID, "provider-id", "", "this node's VM, vco://<location>/<vm id>, instead of reading the Node's spec.providerID")
	f.StringVar(&o.nodeName, "node-name", "", "this node's Node name, whose spec.providerID names the VM (the cloud controller manager sets it)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig for reading the Node; empty means the in-cluster service account")
	f.StringSliceVar(&o.cloudspaces, "cloudspace-id", nil, "a cloudspace of the cluster (repeat for every site); the VM is looked up in them")
	f.IntSliceVar(&o.networks, "external-network-id", nil, "an external network Pods may get NICs on (repeatable); empty allows any of the location's")
	f.StringVar(&o.socket, "socket", DefaultSocket, "the unix socket the CNI plugin calls")
	f.StringVar(&o.stateDir, "state-dir", "/var/lib/capvco-sriov", "where attachments are recorded, so a restarted agent still detaches them")
	f.StringVar(&o.installPlugin, "install-cni-plugin", "", "the capvco-sriov plugin binary to copy into --cni-bin-dir at start (the DaemonSet passes the image's /capvco-sriov); empty installs nothing")
	f.StringVar(&o.cniBinDir, "cni-bin-dir", "/opt/cni/bin", "the node's CNI plugin directory, where --install-cni-plugin puts the plugin")
	config.BindPlatformFlags(f, &o.platform)
	return cmd
}

func (o options) run(ctx context.Context) error {
	if len(o.cloudspaces) == 0 {
		return errors.New("--cloudspace-id is required: name every cloudspace of the cluster")
	}
	if o.installPlugin != "" {
		if err := InstallPlugin(o.installPlugin, o.cniBinDir); err != nil {
			return err
		}
	}
	creds, err := config.Config{CredentialsDir: o.credentialsDir}.Credentials()
	if err != nil {
		return err
	}
	policy, err := config.FlagClientOptions(o.platform)
	if err != nil {
		return err
	}
	client, err := vco.New(creds, policy)
	if err != nil {
		return err
	}
	providerID := o.providerID
	if providerID == "" {
		if providerID, err = o.readProviderID(ctx); err != nil {
			return err
		}
	}
	log := funcr.NewJSON(func(obj string) { fmt.Fprintln(os.Stderr, obj) }, funcr.Options{})
	a := &Agent{API: client, Networks: o.networks, Store: Store{Dir: o.stateDir}, Log: log}
	if a.Location, a.Cloudspace, a.VMID, err = Locate(ctx, client, providerID, o.cloudspaces); err != nil {
		return err
	}
	ln, err := Listen(o.socket)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: Handler(a), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Info("serving the CNI plugin", "socket", o.socket, "vm", a.VMID, "cloudspace", a.Cloudspace, "networks", o.networks)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (o options) readProviderID(ctx context.Context) (string, error) {
	if o.nodeName == "" {
		return "", errors.New("set --node-name (the DaemonSet passes NODE_NAME) or --provider-id")
	}
	var rc *rest.Config
	var err error
	if o.kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return "", err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return "", err
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read Node %s: %w", o.nodeName, err)
	}
	if n.Spec.ProviderID == "" {
		return "", fmt.Errorf("node %s has no spec.providerID yet: the cloud controller manager sets it; the agent starts again when it has", o.nodeName)
	}
	return n.Spec.ProviderID, nil
}
