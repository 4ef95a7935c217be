package csi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/capx-io/capx/internal/capvco/csi/config"
	"github.com/capx-io/capx/internal/capvco/csi/device"
	"github.com/capx-io/capx/internal/capvco/csi/transit"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/version"
)

const example = `  # The controller, next to the CSI sidecars (see internal/capvco/csi/manifests):
  capvco-csi-driver controller --endpoint=unix:///csi/csi.sock --config=/etc/capvco/csi.yaml

  # The node plugin, on every node; it reads its Node's provider ID from the API server:
  capvco-csi-driver node --endpoint=unix:///csi/csi.sock --config=/etc/capvco/csi.yaml --node-name=$(NODE_NAME)`

type flags struct {
	endpoint, config, nodeName, nodeID, byIDDir, kubeconfig string
	maxVolumes                                              int64
}

// NewCommand is the capvco-csi-driver command; it runs until ctx ends.
func NewCommand(ctx context.Context) *cobra.Command {
	var f flags
	root := &cobra.Command{
		Use:   "capvco-csi-driver",
		Short: "The CSI driver for whitesky.cloud disks in CAPVCO clusters",
		Long: `capvco-csi-driver serves the Container Storage Interface for whitesky.cloud disks: the controller
creates, attaches, grows, snapshots, clones and deletes disks through the location-scoped disk
API; the node plugin finds an attached disk by its serial, opens LUKS2 for encrypted volumes,
formats ext4 or xfs once and mounts it. docs/capvco/storage.md describes it.`,
		Example:       example,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&f.endpoint, "endpoint", "unix:///csi/csi.sock", "the unix socket the CSI sidecars (or the kubelet) call")
	root.PersistentFlags().StringVar(&f.config, "config", "", "the driver's config file (cluster, sites, credential directory, encryption)")
	controller := &cobra.Command{
		Use:   "controller",
		Short: "Serve the controller service (with the external-provisioner, -attacher, -resizer and -snapshotter)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := BuildController(cmd.Context(), f.config)
			if err != nil {
				return err
			}
			return d.Serve(cmd.Context(), f.endpoint)
		},
	}
	node := &cobra.Command{
		Use:   "node",
		Short: "Serve the node service on this node (with the node-driver-registrar)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := f.buildNode(cmd.Context())
			if err != nil {
				return err
			}
			return d.Serve(cmd.Context(), f.endpoint)
		},
	}
	node.Flags().StringVar(&f.nodeName, "node-name", "", "this node's Node name; its spec.providerID (set by the cloud controller manager) is the CSI node id")
	node.Flags().StringVar(&f.nodeID, "node-id", "", "the CSI node id, vco://<location>/<vm id>, instead of reading it from the Node")
	node.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig for reading the Node; empty means the in-cluster service account")
	node.Flags().StringVar(&f.byIDDir, "by-id-dir", device.ByIDDir, "where disks are linked by serial")
	node.Flags().Int64Var(&f.maxVolumes, "max-volumes", 15, "how many volumes this node takes: the VM's disk limit less its boot disk")
	version := &cobra.Command{
		Use: "version", Short: "Print the version", Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), version.Get().String()) },
	}
	root.AddCommand(controller, node, version)
	root.SetContext(ctx)
	return root
}

// BuildController reads the config, checks the credential's location grant and builds the
// controller.
func BuildController(ctx context.Context, path string) (*Driver, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	creds, err := cfg.Credentials()
	if err != nil {
		return nil, err
	}
	// The endpoint policy too: a credential the platform block refuses stops the driver here.
	if _, err := vco.New(creds, cfg.Platform.ClientOptions()); err != nil {
		return nil, err
	}
	f := vco.NewFactory(cfg.Platform.ClientOptions())
	keys, err := Keys(cfg.Encryption)
	if err != nil {
		return nil, err
	}
	c := &Controller{Config: cfg, Keys: keys, Platform: func() (Platform, error) {
		creds, err := cfg.Credentials()
		if err != nil {
			return nil, err
		}
		return f.Client(creds)
	}}
	if err := c.CheckGrant(ctx); err != nil {
		return nil, err
	}
	return &Driver{Config: cfg, Controller: c}, nil
}

func (f flags) buildNode(ctx context.Context) (*Driver, error) {
	cfg, err := config.Load(f.config)
	if err != nil {
		return nil, err
	}
	keys, err := Keys(cfg.Encryption)
	if err != nil {
		return nil, err
	}
	id := f.nodeID
	if id == "" {
		if id, err = f.providerID(ctx); err != nil {
			return nil, err
		}
	}
	n, err := NewNode(id, f.maxVolumes, device.Finder{Dir: f.byIDDir}, keys)
	if err != nil {
		return nil, err
	}
	return &Driver{Config: cfg, Node: n}, nil
}

// providerID waits for the cloud controller manager to set the Node's provider ID.
func (f flags) providerID(ctx context.Context) (string, error) {
	if f.nodeName == "" {
		return "", errors.New("--node-name is empty: pass the Node's name (the DaemonSet sets it from spec.nodeName) or --node-id")
	}
	var rc *rest.Config
	var err error
	if f.kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return "", fmt.Errorf("a client for reading Node %s: %w", f.nodeName, err)
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return "", err
	}
	for {
		n, err := kube.CoreV1().Nodes().Get(ctx, f.nodeName, metav1.GetOptions{})
		if err == nil && n.Spec.ProviderID != "" {
			return n.Spec.ProviderID, nil
		}
		klog.InfoS("waiting for the Node's provider ID (set by capvco-cloud-controller-manager)", "node", f.nodeName, "err", err)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("Node %s has no provider ID yet: %w", f.nodeName, ctx.Err())
		case <-time.After(5 * time.Second):
		}
	}
}

// Keys is the key wrapper of a vault mode: nil for none, the transit key for external.
func Keys(e config.Encryption) (KeyWrapper, error) {
	if e.VaultMode != config.VaultExternal || e.Transit == nil {
		return nil, nil
	}
	t := *e.Transit
	hc := &http.Client{Timeout: 30 * time.Second}
	if t.CAFile != "" {
		tr, err := caTransport(t.CAFile)
		if err != nil {
			return nil, err
		}
		hc.Transport = tr
	}
	return &transit.Client{Address: t.Address, Mount: t.MountPath(), Key: t.Key, Namespace: t.Namespace, HTTP: hc,
		Token: func() (string, error) {
			b, err := config.ReadBounded(t.TokenFile)
			if err != nil {
				return "", fmt.Errorf("encryption.transit.tokenFile %s: %w", t.TokenFile, err)
			}
			tok := strings.TrimSpace(string(b))
			if tok == "" {
				return "", fmt.Errorf("encryption.transit.tokenFile %s is empty", t.TokenFile)
			}
			return tok, nil
		}}, nil
}
