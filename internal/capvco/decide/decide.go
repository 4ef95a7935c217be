// Package decide holds CAPVCO's decisions as pure functions: which sites a cluster has, which
// images they need, how the server pool must change, which links to make, which GPU profile to
// reserve, what capacity a template publishes. The controllers observe, call these, and act.
package decide

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/gpuaddon"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/vco"
)

// DefaultAPIServerPort is where the load balancer listens and API servers answer.
const DefaultAPIServerPort = 6443

// DefaultHealthCheckInterval is used when healthCheckIntervalSeconds is unset.
const DefaultHealthCheckInterval = 10

// Site is one cloudspace of a cluster.
type Site struct {
	Name           string
	Location       string
	PrivateNetwork string
}

// Sites lists the primary site first, then the geo sites in spec order. Sites without a
// private network get distinct defaults (192.168.103.0/24, .104, ...): linked cloudspaces
// must not overlap.
func Sites(spec capvcov1.VCOClusterSpec) []Site {
	sites := []Site{{Name: names.PrimarySite, Location: spec.Location, PrivateNetwork: spec.Cloudspace.PrivateNetwork}}
	if spec.Geo != nil {
		for _, s := range spec.Geo.Sites {
			sites = append(sites, Site{Name: s.Name, Location: s.Location, PrivateNetwork: s.PrivateNetwork})
		}
	}
	if len(sites) == 1 {
		return sites
	}
	taken := map[string]bool{}
	for _, s := range sites {
		taken[s.PrivateNetwork] = true
	}
	next := 103
	for i := range sites {
		for sites[i].PrivateNetwork == "" {
			cidr := fmt.Sprintf("192.168.%d.0/24", next)
			next++
			if !taken[cidr] {
				sites[i].PrivateNetwork, taken[cidr] = cidr, true
			}
		}
	}
	return sites
}

// SiteOf returns the site called name ("" means the primary site).
func SiteOf(sites []Site, name string) (Site, bool) {
	if name == "" {
		name = names.PrimarySite
	}
	for _, s := range sites {
		if s.Name == name {
			return s, true
		}
	}
	return Site{}, false
}

// MissingLocationImages lists the locations, other than the primary one, that have sites but
// no image in spec.geo.locationImages.
func MissingLocationImages(spec capvcov1.VCOClusterSpec) []string {
	var missing []string
	for _, s := range Sites(spec)[1:] {
		if s.Location == spec.Location || slices.Contains(missing, s.Location) {
			continue
		}
		if _, ok := spec.Geo.LocationImages[s.Location]; !ok {
			missing = append(missing, s.Location)
		}
	}
	return missing
}

// ImageFor picks a machine's image in a location: the machine's own image in the primary
// location (or when locationImages names none there), else spec.geo.locationImages.
// ok=false means the site's location has no image.
func ImageFor(cluster capvcov1.VCOClusterSpec, machine capvcov1.ImageSpec, location string) (capvcov1.ImageSpec, bool) {
	if cluster.Geo != nil {
		if id, ok := cluster.Geo.LocationImages[location]; ok {
			return capvcov1.ImageSpec{ID: &id}, true
		}
	}
	if location == cluster.Location {
		return machine, true
	}
	return capvcov1.ImageSpec{}, false
}

// PoolDelta is how a server pool must change so that its hosts are exactly healthy.
func PoolDelta(hosts []vco.PoolHost, healthy []string) (add []string, remove []vco.PoolHost) {
	have := map[string]bool{}
	for _, h := range hosts {
		if slices.Contains(healthy, h.Address) && !have[h.Address] {
			have[h.Address] = true
			continue
		}
		remove = append(remove, h) // unhealthy, unknown or a duplicate
	}
	for _, a := range healthy {
		if !have[a] {
			have[a] = true
			add = append(add, a)
		}
	}
	sort.Strings(add)
	return add, remove
}

// ProbeSet is what the health check probes: the control-plane machines' addresses, and the
// pool's current hosts except those of machines being deleted (which leave at once). Probing
// current hosts too keeps a member whose machine has not reported its address yet (status
// lost in a move, a restart) instead of dropping it and cutting the API off.
func ProbeSet(machines, leaving []string, hosts []vco.PoolHost) []string {
	set := slices.Clone(machines)
	for _, h := range hosts {
		if !slices.Contains(leaving, h.Address) {
			set = append(set, h.Address)
		}
	}
	slices.Sort(set)
	return slices.Compact(set)
}

// LeavePoolWait is how long a deleting control-plane machine waits for its VCOCluster to take
// its API server out of the load balancer's pool before it deletes its VM anyway.
const LeavePoolWait = 2 * time.Minute

// WaitsToLeavePool says whether a deleting machine keeps its VM for now: a control-plane
// machine whose address is still a pool member waits until the VCOCluster, which sees it
// deleting, takes it out. Without the wait, a machine deleted within one pass was gone before
// the cluster saw it leaving, and its address, still answering, stayed a member (ProbeSet keeps
// hosts of no machine). After LeavePoolWait it goes on: a cluster that cannot sync its pool
// does not hold the deletion.
func WaitsToLeavePool(controlPlane bool, ip string, members []string, deletingSince, now time.Time) bool {
	return controlPlane && ip != "" && slices.Contains(members, ip) && now.Sub(deletingSince) < LeavePoolWait
}

// MeshPairs lists the links of a full mesh over n sites: (i, j) with i < j.
func MeshPairs(n int) [][2]int {
	var out [][2]int
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			out = append(out, [2]int{i, j})
		}
	}
	return out
}

// GPUProfile picks the profile to reserve: the pinned one, else the first profile (by id) of
// the vendor with free instances.
func GPUProfile(spec capvcov1.GPUSpec, offered []vco.GPUProfile) (string, error) {
	if spec.ProfileID != "" {
		for _, p := range offered {
			if p.ID == spec.ProfileID {
				return p.ID, nil
			}
		}
		return "", fmt.Errorf("GPU profile %q is not offered in this location", spec.ProfileID)
	}
	var ids []string
	for _, p := range offered {
		if strings.EqualFold(p.Vendor, spec.Vendor) && p.AvailableInstances > 0 {
			ids = append(ids, p.ID)
		}
	}
	if len(ids) == 0 {
		return "", fmt.Errorf("no %s GPU profile with free instances in this location", spec.Vendor)
	}
	sort.Strings(ids)
	return ids[0], nil
}

// GPUCount is the number of vGPUs a machine asks for.
func GPUCount(spec *capvcov1.GPUSpec) int {
	if spec == nil {
		return 0
	}
	return max(int(spec.Count), 1)
}

// Cluster-autoscaler scale-from-zero annotations (clusterapi provider).
const (
	CapacityCPU     = "capacity.cluster-autoscaler.kubernetes.io/cpu"
	CapacityMemory  = "capacity.cluster-autoscaler.kubernetes.io/memory"
	CapacityGPUType = "capacity.cluster-autoscaler.kubernetes.io/gpu-type"
	CapacityGPU     = "capacity.cluster-autoscaler.kubernetes.io/gpu-count"
)

// Capacity is what a machine template publishes for scale from zero in a cluster whose GPU
// add-on is addon, and, when the GPU is left out, the reason and message why. The GPU resource
// is gpuaddon.Resource's: the one the add-on's device plugin advertises on the machine's node,
// or none, so the autoscaler never counts a GPU no node will show.
func Capacity(spec capvcov1.VCOMachineSpec, addon gpuaddon.Addon) (annotations map[string]string, reason, message string) {
	annotations = map[string]string{
		CapacityCPU:    strconv.Itoa(int(spec.VCPUs)),
		CapacityMemory: resource.NewQuantity(int64(spec.MemoryMiB)*1024*1024, resource.BinarySI).String(),
	}
	reason = capvcov1.CapacityPublishedReason
	switch g := spec.GPU; {
	case g == nil:
	case g.ProfileID != "":
		reason = capvcov1.GPUProfilePinnedReason
		message = fmt.Sprintf("gpu.profileId %q pins a profile, which names no vendor: the GPU is left out of the scale-from-zero capacity, so this pool does not scale up from zero for a GPU pod. Set gpu.vendor instead", g.ProfileID)
	case !strings.EqualFold(g.Vendor, string(gpuaddon.NVIDIA)):
		reason = capvcov1.GPUVendorUnsupportedReason
		message = fmt.Sprintf("the %s device plugin does not ship yet: the GPU is left out of the scale-from-zero capacity", g.Vendor)
	case gpuaddon.Resource(addon, g) == "":
		reason = capvcov1.GPUAddonNotInstalledReason
		message = fmt.Sprintf("the cluster's GPU add-on is %s (spec.addons.gpu), so no device plugin advertises the GPU: it is left out of the scale-from-zero capacity. Set spec.addons.gpu.addon to nvidia", addon)
	default:
		annotations[CapacityGPUType] = gpuaddon.Resource(addon, g)
		annotations[CapacityGPU] = strconv.Itoa(GPUCount(g))
	}
	return annotations, reason, message
}

// CapacityResources is a template's status.capacity, the shape CAPI's InfraMachineTemplate
// contract gives the cluster autoscaler for scale from zero: cpu, memory, ephemeral-storage (the
// boot disk) and the GPU resource the cluster's add-on advertises. What Capacity leaves out of
// the annotations (a pinned profile, an unsupported vendor, add-on none) is left out here too.
func CapacityResources(spec capvcov1.VCOMachineSpec, addon gpuaddon.Addon) corev1.ResourceList {
	out := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(spec.VCPUs), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(spec.MemoryMiB)*1024*1024, resource.BinarySI),
	}
	if spec.BootDiskGiB > 0 {
		out[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(spec.BootDiskGiB)*1024*1024*1024, resource.BinarySI)
	}
	if r := gpuaddon.Resource(addon, spec.GPU); r != "" && spec.GPU.ProfileID == "" {
		out[corev1.ResourceName(r)] = *resource.NewQuantity(int64(GPUCount(spec.GPU)), resource.DecimalSI)
	}
	return out
}

// OperatorRetry is how soon a refused or failed operator action (publishing a location image,
// writing the registry certificate) is tried again.
const OperatorRetry = time.Minute

// OperatorCheckDue says whether an operator action whose inputs are unchanged since it was
// last checked at checkedAt runs again: never after a success, OperatorRetry after a failure.
func OperatorCheckDue(succeeded bool, checkedAt, now time.Time) bool {
	return !succeeded && !now.Before(checkedAt.Add(OperatorRetry))
}

// VMReadDue says whether a machine's VM is read from the platform again, and if not, when it
// is: the VM recorded as last read (state and time) stands while it was running and is the
// machine's recorded VM, until the end of the resync window of its read; anything else is read
// now. Windows are resync long, counted from the zero time, so the machines read in one window
// fall due together at its end and share their cloudspace's listing (vm.Listings); each VM is
// still read at least once every resync.
func VMReadDue(recorded *capvcov1.VMStatus, recordedID, id int, resync time.Duration, now time.Time) (due bool, next time.Duration) {
	if recorded == nil || recordedID != id || !strings.EqualFold(recorded.State, "RUNNING") {
		return true, 0
	}
	at := recorded.CheckedAt.Time
	if at.After(now) {
		return true, 0 // recorded by a clock ahead of this one
	}
	left := at.Truncate(resync).Add(resync).Sub(now)
	if left <= 0 {
		return true, 0
	}
	return false, left
}

// How often the add-ons of a workload cluster are looked at: an add-on applied and available is
// checked again after DefaultAddonResync, one that is not (or failed) after DefaultAddonPoll.
const (
	DefaultAddonResync = 5 * time.Minute
	DefaultAddonPoll   = 15 * time.Second
)

// AddonDue says whether an add-on is applied to the workload cluster this pass: when nothing
// was recorded, what is rendered now differs from what was applied (a new manager version, a
// changed spec, a rotated Secret), it was not available, or its last check is resync old.
func AddonDue(recorded *capvcov1.AddonStatus, hash string, resync time.Duration, now time.Time) bool {
	if recorded == nil || recorded.CheckedAt == nil || recorded.Hash != hash || !recorded.Available {
		return true
	}
	return !now.Before(recorded.CheckedAt.Add(resync)) || recorded.CheckedAt.After(now.Add(resync))
}

// PlatformReadDue says whether a VCOCluster pass reads its sites' cloudspaces, its load
// balancer and its pool from the platform, or takes them from status (which records them, with
// the pool's members, as of status.platformCheckedAt). A read is due when status does not
// record every site's cloudspace (id and external address) and the load balancer on the
// primary's address, when the spec changed since (observedGeneration), when the last pass did
// not find the cloudspaces and the load balancer ready, or when the last read is resync old
// (or stamped by a clock ahead of this one). Otherwise next is when it becomes due. A change
// of the API servers that answer is the caller's to see: it needs the pool read too.
func PlatformReadDue(vc *capvcov1.VCOCluster, resync time.Duration, now time.Time) (due bool, next time.Duration) {
	st := &vc.Status
	if st.PlatformCheckedAt == nil || st.ObservedGeneration != vc.Generation || st.LoadBalancer == nil ||
		st.LoadBalancer.ID == "" || st.LoadBalancer.ServerPoolID == "" {
		return true, 0
	}
	for i, s := range Sites(vc.Spec) {
		j := slices.IndexFunc(st.Cloudspaces, func(c capvcov1.CloudspaceStatus) bool { return c.Site == s.Name })
		if j < 0 || st.Cloudspaces[j].ID == "" || st.Cloudspaces[j].ExternalIP == "" ||
			(i == 0 && st.Cloudspaces[j].ExternalIP != st.LoadBalancer.Address) {
			return true, 0
		}
	}
	for _, typ := range []string{capvcov1.CloudspaceReadyCondition, capvcov1.LoadBalancerReadyCondition} {
		c := meta.FindStatusCondition(st.Conditions, typ)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != vc.Generation {
			return true, 0
		}
	}
	left := st.PlatformCheckedAt.Add(resync).Sub(now)
	if left <= 0 || left > resync {
		return true, 0
	}
	return false, left
}

// SameMembers says whether the API servers that answer are exactly the recorded members (in
// any order, duplicates aside).
func SameMembers(healthy, members []string) bool {
	a, b := slices.Clone(healthy), slices.Clone(members)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
