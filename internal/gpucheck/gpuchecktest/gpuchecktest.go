// Package gpuchecktest seeds a simulated whitesky.cloud account with one reservation of every
// kind gpucheck must tell apart, and holds the management cluster that goes with it. The
// engine's tests, the CLIs' tests and the benchmark share it.
package gpuchecktest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/capx-io/capx/internal/gpucheck"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// TB is the part of testing.TB the fixture needs.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// Locations of the fixture.
const (
	Loc  = vcosim.SeedLocation  // the hand-made cases
	Loc2 = vcosim.SeedLocation2 // the bulk: more than 1,000 reservations, paginated
)

// Bulk sizes in Loc2.
const (
	BulkOrphans = 1100 // capvco_bulk_c_m<i>_gpu_0 of a cluster that is gone
	BulkForeign = 150  // team-gpu-<i>
)

// Case is one hand-made reservation and the class it must get with and without the
// management cluster.
type Case struct {
	Label string
	Name  string
	// AttachTo names a VM of the fixture ("m1", "jupyter", "m8-old"), or "" for unattached.
	AttachTo string
	// SoftDelete moves it to the recycle bin.
	SoftDelete bool
	// Want is the class with the management cluster; WantUnverified without it.
	Want, WantUnverified gpucheck.Class
	// Releasable with the management cluster: release selects it with no opt-in. Needs is
	// the opt-in flag that selects it otherwise (gpucheck.OptInRenamed), "" for none.
	Releasable bool
	Needs      string
}

// Cases are the hand-made reservations of Loc. Machines ns/m1 (VM "m1") and ns/m2 (being
// deleted) of cluster ns/c1 exist; everything else named is gone.
var Cases = []Case{
	{Label: "owned-attached", Name: "capvco_ns_c1_m1_gpu_0", AttachTo: "m1", Want: gpucheck.Owned, WantUnverified: gpucheck.Unverified},
	{Label: "owned-unattached", Name: "capvco_ns_c1_m1_gpu_1", Want: gpucheck.Owned, WantUnverified: gpucheck.Unverified},
	{Label: "owned-duplicate-name", Name: "capvco_ns_c1_m1_gpu_1", Want: gpucheck.Owned, WantUnverified: gpucheck.Unverified},
	{Label: "owned-machine-deleting", Name: "capvco_ns_c1_m2_gpu_0", Want: gpucheck.Owned, WantUnverified: gpucheck.Unverified},
	{Label: "orphan-machine-gone", Name: "capvco_ns_c1_m9_gpu_0", Want: gpucheck.Orphaned, WantUnverified: gpucheck.Unverified, Releasable: true},
	{Label: "orphan-cluster-gone", Name: "capvco_old_gone_m1_gpu_0", Want: gpucheck.Orphaned, WantUnverified: gpucheck.Unverified, Releasable: true},
	{Label: "orphan-same-machine-name-other-cluster", Name: "capvco_ns_c2_m1_gpu_0", Want: gpucheck.Orphaned, WantUnverified: gpucheck.Unverified, Releasable: true},
	{Label: "renamed-dashes", Name: "capvco-ns-c1-m3-gpu-0", Want: gpucheck.Renamed, WantUnverified: gpucheck.Renamed, Needs: gpucheck.OptInRenamed},
	{Label: "renamed-upper", Name: "CAPVCO_ns_c1_m1_gpu_0", Want: gpucheck.Renamed, WantUnverified: gpucheck.Renamed, Needs: gpucheck.OptInRenamed},
	{Label: "renamed-leading-zero", Name: "capvco_ns_c1_m1_gpu_01", Want: gpucheck.Renamed, WantUnverified: gpucheck.Renamed, Needs: gpucheck.OptInRenamed},
	{Label: "renamed-trailing-space", Name: "capvco_ns_c1_m1_gpu_0 ", Want: gpucheck.Renamed, WantUnverified: gpucheck.Renamed, Needs: gpucheck.OptInRenamed},
	{Label: "renamed-attached-to-our-vm", Name: "capvco_ns_c1_m1_gpu_0_old", AttachTo: "m1", Want: gpucheck.Renamed, WantUnverified: gpucheck.Renamed},
	{Label: "attached-foreign-vm", Name: "capvco_ns_c1_m1_gpu_2", AttachTo: "jupyter", Want: gpucheck.AttachedForeign, WantUnverified: gpucheck.Unverified},
	{Label: "attached-orphan", Name: "capvco_ns_c1_m8_gpu_0", AttachTo: "m8-old", Want: gpucheck.AttachedForeign, WantUnverified: gpucheck.Unverified},
	{Label: "renamed-attached-foreign-vm", Name: "capvco-scratch", AttachTo: "jupyter", Want: gpucheck.AttachedForeign, WantUnverified: gpucheck.Renamed},
	{Label: "recycle-bin", Name: "capvco_ns_c1_m7_gpu_0", SoftDelete: true, Want: gpucheck.RecycleBin, WantUnverified: gpucheck.RecycleBin, Releasable: true},
	{Label: "recycle-bin-renamed", Name: "capvco-leftover", SoftDelete: true, Want: gpucheck.RecycleBin, WantUnverified: gpucheck.RecycleBin, Needs: gpucheck.OptInRenamed},
	{Label: "recycle-bin-of-live-machine", Name: "capvco_ns_c1_m1_gpu_3", SoftDelete: true, Want: gpucheck.RecycleBin, WantUnverified: gpucheck.RecycleBin, Releasable: true},
	{Label: "foreign", Name: "ml-team-a100", Want: gpucheck.Foreign, WantUnverified: gpucheck.Foreign},
	{Label: "foreign-prefixed", Name: "xcapvco_ns_c1_m9_gpu_0", Want: gpucheck.Foreign, WantUnverified: gpucheck.Foreign},
	{Label: "foreign-attached", Name: "jupyter-gpu", AttachTo: "jupyter", Want: gpucheck.Foreign, WantUnverified: gpucheck.Foreign},
	{Label: "foreign-deleted", Name: "old-team-gpu", SoftDelete: true, Want: gpucheck.Foreign, WantUnverified: gpucheck.Foreign},
}

// Fixture is the seeded account.
type Fixture struct {
	Sim    *vcosim.Server
	Client *vco.Client // the cluster credential, retries fast
	Creds  vco.Credentials
	// IDs maps a Case label to its reservation id; BulkOrphanIDs are Loc2's orphans.
	IDs           map[string]string
	BulkOrphanIDs []string
	// VMs maps a VM name to its id; Cloudspace holds them.
	VMs        map[string]int
	Cloudspace string
	// Cluster is the management cluster that goes with the account.
	Cluster *Static
}

// ClientOptions retry fast, for tests that inject faults.
func ClientOptions() vco.Options {
	return vco.Options{BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3, Timeout: 5 * time.Second}
}

// Seed starts a simulator and seeds it with every Case. bulk adds Loc2's paginated
// reservations.
func Seed(t TB, bulk bool) *Fixture {
	t.Helper()
	return seed(t, bulk, Cases)
}

// SeedOne seeds only one Case (the VMs and the management cluster are the same).
func SeedOne(t TB, c Case) *Fixture {
	t.Helper()
	return seed(t, false, []Case{c})
}

func seed(t TB, bulk bool, cases []Case) *Fixture {
	t.Helper()
	sim := vcosim.NewTestServer(t, vcosim.Options{})
	tok, err := sim.Token(vcosim.SeedClusterPrinc, 0)
	must(t, err)
	f := &Fixture{Sim: sim, IDs: map[string]string{}, VMs: map[string]int{}}
	f.Creds = vco.Credentials{URL: sim.APIURL(), Customer: vcosim.SeedCustomer, JWT: tok, IAMURL: sim.IAMURL()}
	f.Client, err = vco.New(f.Creds, ClientOptions())
	must(t, err)
	ctx := context.Background()

	cs, _, err := f.Client.EnsureCloudspace(ctx, vco.CreateCloudspaceRequest{Name: "capvco_ns_c1_site-a", Location: Loc})
	must(t, err)
	f.Cloudspace = cs.ID
	img, err := f.Client.FindImage(ctx, Loc, vcosim.SeedImageName)
	must(t, err)
	for _, name := range []string{"m1", "jupyter", "m8-old"} {
		id, err := f.Client.CreateVM(ctx, cs.ID, vco.CreateVMRequest{Name: name, VCPUs: 2, MemoryMiB: 2048, ImageID: img.ID})
		must(t, err)
		f.VMs[name] = id
	}
	for _, c := range cases {
		ids, err := sim.ReserveVGPUs(vcosim.SeedCustomer, Loc, vcosim.SeedStubGPUProfile, c.Name)
		must(t, err)
		f.IDs[c.Label] = ids[0]
		if c.AttachTo != "" {
			must(t, f.Client.AttachVGPU(ctx, cs.ID, f.VMs[c.AttachTo], ids[0]))
		}
		if c.SoftDelete {
			must(t, f.SoftDelete(Loc, ids[0]))
		}
	}
	if bulk {
		names := make([]string, 0, BulkOrphans+BulkForeign)
		for i := range BulkOrphans {
			names = append(names, fmt.Sprintf("capvco_bulk_c_m%d_gpu_0", i))
		}
		for i := range BulkForeign {
			names = append(names, fmt.Sprintf("team-gpu-%d", i))
		}
		ids, err := sim.ReserveVGPUs(vcosim.SeedCustomer, Loc2, vcosim.SeedStubGPUProfile, names...)
		must(t, err)
		f.BulkOrphanIDs = ids[:BulkOrphans]
	}

	m1 := int64(f.VMs["m1"])
	f.Cluster = &Static{
		machines: []gpucheck.Machine{
			{Namespace: "ns", Name: "m1", Cluster: "c1", VMID: &m1},
			{Namespace: "ns", Name: "m2", Cluster: "c1", Deleting: true},
		},
		clusters: []types.NamespacedName{{Namespace: "ns", Name: "c1"}},
	}
	return f
}

// SoftDelete deletes a reservation without permanently=true, as the portal's delete does:
// it lands in the recycle bin, still billed. The client has no call for it on purpose.
func (f *Fixture) SoftDelete(location, id string) error {
	tok, err := f.Sim.Token(vcosim.SeedClusterPrinc, 0)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodDelete, f.Sim.APIURL()+"/customers/"+vcosim.SeedCustomer+"/locations/"+location+"/vgpus/"+id, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("soft delete of %s: %s", id, resp.Status)
	}
	return nil
}

// Billed says whether the reservation is still billed.
func (f *Fixture) Billed(id string) bool {
	for _, b := range f.Sim.Billed() {
		if b.Kind == "vgpu" && b.ID == id {
			return true
		}
	}
	return false
}

// Static is a management cluster held in memory: the machines and clusters of the fixture,
// changeable while a test runs (a machine that comes back between list and release).
type Static struct {
	mu       sync.Mutex
	machines []gpucheck.Machine
	clusters []types.NamespacedName
}

// Machines returns the machines.
func (s *Static) Machines() []gpucheck.Machine {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]gpucheck.Machine(nil), s.machines...)
}

// Clusters returns the clusters.
func (s *Static) Clusters() []types.NamespacedName {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]types.NamespacedName(nil), s.clusters...)
}

// AddMachine adds a machine (and its cluster).
func (s *Static) AddMachine(m gpucheck.Machine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.machines = append(s.machines, m)
	s.clusters = append(s.clusters, types.NamespacedName{Namespace: m.Namespace, Name: m.Cluster})
}

// Owners implements gpucheck.ManagementCluster.
func (s *Static) Owners(context.Context) (*gpucheck.Owners, error) {
	return gpucheck.NewOwners(s.Machines(), s.Clusters()), nil
}

// Machine implements gpucheck.ManagementCluster.
func (s *Static) Machine(_ context.Context, namespace, name string) (*gpucheck.Machine, error) {
	for _, m := range s.Machines() {
		if m.Namespace == namespace && m.Name == name {
			return &m, nil
		}
	}
	return nil, nil
}

func must(t TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("seeding the gpucheck fixture: %v", err)
	}
}

// TeamPrefix names the other team's reservations SeedInterleaved reserves.
const TeamPrefix = "team-b-"

// SeedInterleaved reserves n orphans (capvco_gone_c_m<i>_gpu_0, of a cluster that does not
// exist) in location, each after one of another team's reservations (team-b-<i>), and returns
// the orphans' ids: with vcosim.TeamChurn, the other team's releases land before the cursor
// and between the orphans.
func SeedInterleaved(t TB, f *Fixture, location string, n int) []string {
	t.Helper()
	names := make([]string, 0, 2*n)
	for i := range n {
		names = append(names, fmt.Sprintf("%s%d", TeamPrefix, i), fmt.Sprintf("capvco_gone_c_m%d_gpu_0", i))
	}
	ids, err := f.Sim.ReserveVGPUs(vcosim.SeedCustomer, location, vcosim.SeedStubGPUProfile, names...)
	must(t, err)
	orphans := make([]string, 0, n)
	for i := 1; i < len(ids); i += 2 {
		orphans = append(orphans, ids[i])
	}
	return orphans
}
