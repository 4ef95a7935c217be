package csi_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"

	"github.com/capx-io/capx/internal/capvco/csi"
	"github.com/capx-io/capx/internal/capvco/csi/config"
	"github.com/capx-io/capx/internal/capvco/csi/csitest"
	"github.com/capx-io/capx/internal/capvco/csi/device"
	"github.com/capx-io/capx/internal/capvco/csi/transit/transittest"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

// cluster is a simulated CAPVCO cluster with one worker VM per name, the driver's
// location-scoped credential in files, and disks backed by loop devices.
type cluster struct {
	sim     *vcosim.Server
	loops   *csitest.Loops
	cfg     config.Config
	vms     map[string]vco.VM
	transit *transittest.Server
}

const (
	clusterNS, clusterName = "team-a", "sanity"
	transitKey             = "capvco-volumes"
)

func newCluster(t *testing.T, nodes ...string) *cluster {
	t.Helper()
	sim := vcosim.NewTestServer(t, vcosim.Options{})
	loops := csitest.NewLoops(t)
	sim.SetDiskDevices(loops)
	ctx := context.Background()
	admin := vcotest.Client(t, sim, vcosim.SeedClusterPrinc)
	cs, _, err := admin.EnsureCloudspace(ctx, vco.CreateCloudspaceRequest{Name: names.Cloudspace(clusterNS, clusterName, names.PrimarySite), Location: vcosim.SeedLocation})
	if err != nil {
		t.Fatal(err)
	}
	img, err := admin.FindImage(ctx, vcosim.SeedLocation, vcosim.SeedImageName)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{sim: sim, loops: loops, vms: map[string]vco.VM{}}
	for _, n := range nodes {
		vm, _, err := admin.EnsureVM(ctx, cs.ID, vco.CreateVMRequest{Name: n, Hostname: n, VCPUs: 2, MemoryMiB: 2048, ImageID: img.ID})
		if err != nil {
			t.Fatal(err)
		}
		c.vms[n] = vm
	}
	// The driver's own credential: a location grant, nothing wider.
	if _, err := sim.AddPrincipal(vcosim.Principal{Name: "csi", Customer: vcosim.SeedCustomer,
		Grants: []vcosim.Grant{{ResourceType: "location", ResourceID: vcosim.SeedLocation}}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	tok, err := sim.Token("csi", 0)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, creds, map[string]string{vco.SecretKeyURL: sim.APIURL(), vco.SecretKeyCustomer: vcosim.SeedCustomer, vco.SecretKeyJWT: tok})
	c.transit = transittest.New(t, "transit", "s.vault-token", transitKey)
	writeFiles(t, filepath.Join(dir, "vault"), map[string]string{"token": "s.vault-token\n"})
	c.cfg = config.Config{CredentialsDir: creds, Cluster: config.Cluster{Namespace: clusterNS, Name: clusterName},
		Sites: []config.Site{{Name: names.PrimarySite, Location: vcosim.SeedLocation}},
		Encryption: config.Encryption{VaultMode: config.VaultExternal, Transit: &config.Transit{Address: c.transit.URL, Key: transitKey,
			TokenFile: filepath.Join(dir, "vault", "token")}}}
	if err := c.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for k, v := range files {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// controller is the controller service on the cluster's config, its grant checked.
func (c *cluster) controller(t *testing.T) *csi.Controller {
	t.Helper()
	keys, err := csi.Keys(c.cfg.Encryption)
	if err != nil {
		t.Fatal(err)
	}
	ctrl := &csi.Controller{Config: c.cfg, Keys: keys, Platform: c.platform()}
	if err := ctrl.CheckGrant(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ctrl
}

// platform reads the credential files for every call, as the driver does.
func (c *cluster) platform() func() (csi.Platform, error) {
	f := vco.NewFactory(vco.Options{})
	return func() (csi.Platform, error) {
		creds, err := c.cfg.Credentials()
		if err != nil {
			return nil, err
		}
		return f.Client(creds)
	}
}

// node is the node service of one of the cluster's VMs, finding disks where the harness
// links them for that VM.
func (c *cluster) node(t *testing.T, name string) *csi.Node {
	t.Helper()
	keys, err := csi.Keys(c.cfg.Encryption)
	if err != nil {
		t.Fatal(err)
	}
	vm := c.vms[name]
	n, err := csi.NewNode(names.ProviderID(vcosim.SeedLocation, vm.ID), vcosim.DefaultMaxVMDisks-1, device.Finder{Dir: c.loops.ByIDDir(vm.ID)}, keys)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// serve runs a driver on a socket of the test's until it ends.
func serve(t *testing.T, d *csi.Driver) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, "unix://"+sock) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the driver did not stop")
		}
	})
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "unix://" + sock
}

// TestSanity runs csi-sanity, the CSI conformance suite, against the controller and node
// services on the simulator, with the node's disks as real loop devices: formatting, mounts,
// expansion and stats are real. It needs root.
func TestSanity(t *testing.T) {
	c := newCluster(t, "worker-0")
	addr := serve(t, &csi.Driver{Config: c.cfg, Controller: c.controller(t), Node: c.node(t, "worker-0")})
	cfg := sanity.NewTestConfig()
	cfg.Address = addr
	base := t.TempDir()
	cfg.TargetPath = filepath.Join(base, "target")
	cfg.StagingPath = filepath.Join(base, "staging")
	cfg.TestVolumeSize = 1 << 30
	cfg.TestVolumeExpandSize = 2 << 30
	cfg.TestNodeVolumeAttachLimit = true
	cfg.TestVolumeParameters = map[string]string{csi.ParamIOPS: "3000"}
	sanity.Test(t, cfg)
}
