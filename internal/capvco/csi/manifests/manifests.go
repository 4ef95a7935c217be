// Package manifests renders what runs capvco-csi-driver in a workload cluster: the CSIDriver,
// the controller Deployment with the CSI sidecars (external-provisioner, -attacher, -resizer,
// -snapshotter) on control-plane nodes, the node DaemonSet with the node-driver-registrar,
// RBAC, the configs, the StorageClasses and the VolumeSnapshotClass. A delivery mechanism
// applies the result; the credential Secret (a location-scoped credential) and the vault
// token Secret are the deliverer's to create.
package manifests

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/capx-io/capx/internal/capvco/csi"
	"github.com/capx-io/capx/internal/capvco/csi/config"
)

//go:embed csi.yaml.tmpl
var tmpl string

// Where the controller mounts the credential and both mount the vault token.
const (
	CredentialsDir = "/etc/capvco/credentials"
	VaultTokenDir  = "/etc/capvco/vault"
)

// Images are the driver's and the CSI sidecars' images (e.g. the sig-storage releases of
// csi-provisioner, csi-attacher, csi-resizer, csi-snapshotter, csi-node-driver-registrar).
type Images struct {
	Driver, Provisioner, Attacher, Resizer, Snapshotter, Registrar string
}

// Options are what differs between clusters.
type Options struct {
	Images Images
	// CredentialsSecret is the kube-system Secret with the driver's location-scoped credential.
	CredentialsSecret string
	Cluster           config.Cluster
	Sites             []config.Site
	// Encryption is the VCOCluster's spec.encryption; with vaultMode external, Transit names
	// the key and TransitTokenSecret the kube-system Secret whose "token" key holds the vault
	// token (mounted at VaultTokenDir).
	Encryption         config.Encryption
	TransitTokenSecret string
	// Platform is where the credential may send the controller (the deliverer's own endpoint
	// policy).
	Platform config.Platform
	// Replicas of the controller; default 2 (the sidecars elect a leader).
	Replicas int
	// MaxVolumes per node; default 15 (the simulator's 16 disks less the boot disk).
	MaxVolumes int
	// DefaultClass marks capvco-disk as the default StorageClass.
	DefaultClass bool
}

type sidecar struct {
	Name, Image string
	Args        []string
}

// Render returns the manifests as one multi-document YAML stream.
func Render(o Options) ([]byte, error) {
	im := o.Images
	for name, v := range map[string]string{"driver": im.Driver, "provisioner": im.Provisioner, "attacher": im.Attacher,
		"resizer": im.Resizer, "snapshotter": im.Snapshotter, "registrar": im.Registrar} {
		if v == "" {
			return nil, fmt.Errorf("manifests: the %s image is empty", name)
		}
	}
	if msgs := validation.IsDNS1123Subdomain(o.CredentialsSecret); len(msgs) > 0 {
		return nil, fmt.Errorf("manifests: credential Secret name %q: %s", o.CredentialsSecret, strings.Join(msgs, "; "))
	}
	enc := o.Encryption
	if enc.VaultMode == config.VaultExternal {
		if msgs := validation.IsDNS1123Subdomain(o.TransitTokenSecret); len(msgs) > 0 {
			return nil, fmt.Errorf("manifests: vault token Secret name %q: %s", o.TransitTokenSecret, strings.Join(msgs, "; "))
		}
		if enc.Transit != nil {
			t := *enc.Transit
			t.TokenFile = path.Join(VaultTokenDir, "token")
			enc.Transit = &t
		}
	} else if o.TransitTokenSecret != "" {
		return nil, errors.New("manifests: a vault token Secret is set but vaultMode is not external")
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	if o.MaxVolumes == 0 {
		o.MaxVolumes = 15
	}
	ctrl := config.Config{CredentialsDir: CredentialsDir, Cluster: o.Cluster, Sites: o.Sites, Encryption: enc, Platform: o.Platform}
	if err := ctrl.Validate(); err != nil {
		return nil, fmt.Errorf("manifests: config: %w", err)
	}
	node := ctrl
	node.CredentialsDir = ""
	cc, err := yaml.Marshal(ctrl)
	if err != nil {
		return nil, err
	}
	nc, err := yaml.Marshal(node)
	if err != nil {
		return nil, err
	}
	common := []string{"--csi-address=/csi/csi.sock", "--leader-election", "--leader-election-namespace=kube-system", "--timeout=5m"}
	sidecars := []sidecar{
		// Topology makes the PV's node affinity the disk's location.
		{Name: "csi-provisioner", Image: im.Provisioner, Args: slices.Concat(common, []string{"--feature-gates=Topology=true", "--extra-create-metadata", "--default-fstype=ext4"})},
		{Name: "csi-attacher", Image: im.Attacher, Args: common},
		{Name: "csi-resizer", Image: im.Resizer, Args: common},
		{Name: "csi-snapshotter", Image: im.Snapshotter, Args: common},
	}
	t, err := template.New("csi").Option("missingkey=error").Funcs(template.FuncMap{
		"indent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
		},
		"quote": strconv.Quote,
	}).Parse(tmpl)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = t.Execute(&b, map[string]any{"Driver": csi.DriverName, "Image": im.Driver, "RegistrarImage": im.Registrar, "Sidecars": sidecars,
		"CredentialsSecret": o.CredentialsSecret, "CredentialsDir": CredentialsDir, "TransitTokenSecret": o.TransitTokenSecret,
		"VaultTokenDir": VaultTokenDir, "ControllerConfig": string(cc), "NodeConfig": string(nc), "Replicas": o.Replicas,
		"MaxVolumes": o.MaxVolumes, "DefaultClass": o.DefaultClass})
	return b.Bytes(), err
}
