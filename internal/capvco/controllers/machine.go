package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/gpu"
	"github.com/capx-io/capx/internal/capvco/gpuaddon"
	"github.com/capx-io/capx/internal/capvco/gpuname"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/capvco/platform"
	"github.com/capx-io/capx/internal/capvco/userdata"
	"github.com/capx-io/capx/internal/capvco/vm"
	"github.com/capx-io/capx/internal/vco"
)

type machineScope = capi.Scope[*capvcov1.VCOMachine, *machineObserved]

// machineProvider is the VCOMachine's phases.
type machineProvider struct {
	client   client.Client
	platform platform.Factory
	recorder record.EventRecorder
	clock    clock.PassiveClock
	// resync is how often a provisioned machine's VM is read back, so that a VM deleted out of
	// band is reported. Between reads, reconciles (status patches, CAPI's Machine updates)
	// use the VM status.vm recorded: they are not news about the platform.
	resync time.Duration
	// listings shares a cloudspace's VM listing among the machines that look their VM up at the
	// same time (the lookups around a create); it keeps nothing between listings.
	listings *vm.Listings
}

// DefaultMachineResync is the default Options.MachineResync.
const DefaultMachineResync = 10 * time.Minute

// unsupportedPoll is how often a machine whose user_data cannot be built reads its bootstrap
// Secret again (Secrets are not watched; a spec change reconciles at once).
const unsupportedPoll = 30 * time.Second

// machineObserved is what one reconcile of a VCOMachine saw; each field names the phase that
// sets it.
type machineObserved struct {
	now time.Time
	// findSite, createVM: what the machine waits for before its VM can exist
	waitReason, waitMessage string
	// findSite
	where *site
	// connect
	credentials error
	// observeVM, createVM: the VM, and whether it was read from the platform this pass
	// (else it is status.vm's record)
	vm     *vco.VM
	vmRead bool
	vmErr  error
	lost   bool
	csID   string
	// attachGPUs
	gpuWanted   int
	gpus        []capvcov1.GPUStatus
	gpusChanged bool // gpus is what the platform answered this pass
	gpuErr      error
	// ReconcileDelete
	deleting string
}

// site is where a machine runs: the VCOCluster, the site and its cloudspace.
type site struct {
	cluster    *capvcov1.VCOCluster
	site       decide.Site
	cloudspace capvcov1.CloudspaceStatus
}

// machinePass is one reconcile of a VCOMachine.
type machinePass struct {
	scope *machineScope
	m     *capvcov1.VCOMachine
	obs   *machineObserved
	api   platform.Client
	// stop ends the pass after the current phase without an error.
	stop    bool
	requeue time.Duration
	// done (deleting): the finalizer may go
	done bool
}

func (p *machinePass) requeueAfter(d time.Duration) {
	if d > 0 && (p.requeue == 0 || d < p.requeue) {
		p.requeue = d
	}
}

type machinePhase func(ctx context.Context, p *machinePass) error

func runMachine(ctx context.Context, p *machinePass, phases ...machinePhase) error {
	for _, ph := range phases {
		if err := ph(ctx, p); err != nil || p.stop {
			return err
		}
	}
	return nil
}

func (r *machineProvider) newPass(s *machineScope) *machinePass {
	s.Observed = &machineObserved{now: r.clock.Now(), gpuWanted: decide.GPUCount(s.Object.Spec.GPU)}
	return &machinePass{scope: s, m: s.Object, obs: s.Observed}
}

// ReconcileNormal creates the VM once (found again by id or name), attaches its vGPUs; status
// records providerID, addresses and the failure domain.
func (r *machineProvider) ReconcileNormal(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	p := r.newPass(s)
	err := runMachine(ctx, p,
		r.findSite,   // observe: the VCOCluster and the site's cloudspace (wait while not provisioned)
		r.connect,    // observe: the cluster credential's client
		r.observeVM,  // observe: the recorded VM (status.vm within the resync, else the platform)
		r.createVM,   // act: the VM, when none is recorded (waits for bootstrap data and image)
		r.attachGPUs, // act: the vGPU reservations, attached
	)
	if err == nil && !p.stop && p.obs.vm != nil && !vm.Running(*p.obs.vm) {
		p.requeueAfter(waitPoll)
	}
	return ctrl.Result{RequeueAfter: p.requeue}, err
}

// UpdateStatus computes the VCOMachine's conditions and provisioned flag.
func (r *machineProvider) UpdateStatus(s *machineScope) {
	setMachineStatus(s.Object, s.Observed)
}

// findSite finds the machine's VCOCluster and its site's cloudspace; the pass waits while they
// are not there yet.
func (r *machineProvider) findSite(ctx context.Context, p *machinePass) error {
	s := p.scope
	wait := func(msg string) error {
		p.obs.waitReason, p.obs.waitMessage, p.stop = capvcov1.WaitingForClusterReason, msg, true
		return nil
	}
	if s.Cluster == nil || !s.Cluster.Spec.InfrastructureRef.IsDefined() {
		return wait("the Cluster has no infrastructureRef yet")
	}
	vc := &capvcov1.VCOCluster{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: p.m.Namespace, Name: s.Cluster.Spec.InfrastructureRef.Name}, vc)
	if apierrors.IsNotFound(err) {
		return wait(fmt.Sprintf("VCOCluster %s does not exist", s.Cluster.Spec.InfrastructureRef.Name))
	}
	if err != nil {
		return err
	}
	fd := ""
	if s.Machine != nil {
		fd = s.Machine.Spec.FailureDomain
	}
	st, ok := decide.SiteOf(decide.Sites(vc.Spec), fd)
	if !ok {
		return wait(fmt.Sprintf("failure domain %q is not a site of VCOCluster %s", fd, vc.Name))
	}
	cs := cloudspaceStatus(vc, st.Name)
	if !ptr.Deref(vc.Status.Initialization.Provisioned, false) || cs.ID == "" {
		return wait(fmt.Sprintf("VCOCluster %s is not provisioned yet", vc.Name))
	}
	p.obs.where = &site{cluster: vc, site: st, cloudspace: cs}
	p.obs.csID = cs.ID
	if p.m.Status.CloudspaceID != "" {
		p.obs.csID = p.m.Status.CloudspaceID
	}
	return nil
}

func (r *machineProvider) connect(ctx context.Context, p *machinePass) error {
	vc := p.obs.where.cluster
	api, err := platform.ClientFor(ctx, r.client, r.platform, vc.Namespace, vc.Spec.CredentialsRef.Name)
	p.obs.credentials, p.api = err, api
	return err
}

// knownVMID is the VM recorded for the machine: status, else the provider ID (which survives
// a move that drops status).
func knownVMID(m *capvcov1.VCOMachine) int {
	if m.Status.VMID != nil {
		return int(*m.Status.VMID)
	}
	if _, id, err := names.ParseProviderID(m.Spec.ProviderID); err == nil {
		return id
	}
	return 0
}

// observeVM reads the machine's recorded VM: from status.vm while its record is fresh and
// running (decide.VMReadDue), else from the platform. A VM gone out of band is reported and
// never recreated.
func (r *machineProvider) observeVM(ctx context.Context, p *machinePass) error {
	m := p.m
	id := knownVMID(m)
	if id == 0 {
		return nil
	}
	recordedID := 0
	if m.Status.VMID != nil {
		recordedID = int(*m.Status.VMID)
	}
	if due, next := decide.VMReadDue(m.Status.VM, recordedID, id, r.resync, p.obs.now); !due {
		p.obs.vm = recordedVM(m)
		p.requeueAfter(next)
		return nil
	}
	v, err := vm.Read(ctx, p.api, r.listings, listingKey(p), p.obs.csID, id)
	if errors.Is(err, vm.ErrLost) {
		p.obs.lost, p.obs.vmErr, p.stop = true, err, true
		if !ptr.Deref(m.Status.Initialization.Provisioned, false) || m.Status.VMID != nil {
			r.recorder.Eventf(m, corev1.EventTypeWarning, capvcov1.VMNotFoundEvent,
				"VM %d of this machine no longer exists on the platform; it is not recreated: delete the Machine to replace it", id)
		}
		return nil
	}
	if p.obs.vmErr = err; err != nil {
		return err
	}
	p.obs.vm, p.obs.vmRead = &v, true
	p.requeueAfter(r.resync)
	return nil
}

// listingKey is what the machine's VM listings are shared under: the machines of one cluster
// share its credential, and a listing is of one cloudspace.
func listingKey(p *machinePass) string {
	c := p.obs.where.cluster
	return string(c.UID) + "/" + c.Spec.CredentialsRef.Name + "/" + p.obs.csID
}

// recordedVM is the VM as status.vm and the addresses recorded it.
func recordedVM(m *capvcov1.VCOMachine) *vco.VM {
	v := &vco.VM{ID: int(*m.Status.VMID), Name: m.Status.VM.Name, Status: m.Status.VM.State}
	if ip := internalIP(m.Status.Addresses); ip != "" {
		v.NICs = []vco.NIC{{IP: ip}}
	}
	return v
}

// createVM creates the VM when none is recorded: once the Machine's bootstrap data, the site's
// image and the user data are there.
func (r *machineProvider) createVM(ctx context.Context, p *machinePass) error {
	if p.obs.vm != nil {
		return nil
	}
	s, m, where := p.scope, p.m, p.obs.where
	wait := func(reason, msg string, poll time.Duration) {
		p.obs.waitReason, p.obs.waitMessage, p.stop = reason, msg, true
		p.requeueAfter(poll)
	}
	if s.Machine == nil || s.Machine.Spec.Bootstrap.DataSecretName == nil {
		wait(capvcov1.WaitingForBootstrapDataReason, "the Machine's bootstrap data Secret is not ready yet", 0)
		return nil
	}
	img, ok := decide.ImageFor(where.cluster.Spec, m.Spec.Image, where.site.Location)
	if !ok {
		wait(capvcov1.LocationImageMissingReason, fmt.Sprintf("site %s is in location %s, which has no image in VCOCluster %s spec.geo.locationImages: images are per location; publish one there and add its id",
			where.site.Name, where.site.Location, where.cluster.Name), 0)
		return nil
	}
	imageID, err := vm.Image(ctx, p.api, where.site.Location, img)
	if p.obs.vmErr = err; err != nil {
		return err
	}
	userData, err := r.userData(ctx, p, wait)
	if err != nil || userData == nil {
		return err
	}
	disks := make([]int, 0, len(m.Spec.DataDisksGiB))
	for _, d := range m.Spec.DataDisksGiB {
		disks = append(disks, int(d))
	}
	v, err := vm.Ensure(ctx, p.api, r.listings, listingKey(p), p.obs.csID, vco.CreateVMRequest{
		Name: names.VM(m.Name), Description: fmt.Sprintf("CAPVCO machine %s/%s", m.Namespace, m.Name), Hostname: m.Name,
		VCPUs: int(m.Spec.VCPUs), MemoryMiB: int(m.Spec.MemoryMiB), ImageID: imageID, BootDiskGiB: int(m.Spec.BootDiskGiB),
		DataDisksGiB: disks, UserData: string(userData),
	})
	if p.obs.vmErr = err; err != nil {
		return err
	}
	p.obs.vm, p.obs.vmRead = &v, true
	p.requeueAfter(r.resync)
	return nil
}

// userData builds the VM's user data from the Machine's bootstrap Secret; nil (the pass
// waits) while the Secret is not there or cannot be used.
func (r *machineProvider) userData(ctx context.Context, p *machinePass, wait func(reason, msg string, poll time.Duration)) ([]byte, error) {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: p.m.Namespace, Name: *p.scope.Machine.Spec.Bootstrap.DataSecretName}
	if err := r.client.Get(ctx, key, secret); err != nil {
		wait(capvcov1.WaitingForBootstrapDataReason, fmt.Sprintf("bootstrap data Secret %s: %v", key.Name, err), waitPoll) // Secrets are not watched
		return nil, client.IgnoreNotFound(err)
	}
	data := secret.Data["value"]
	if len(data) == 0 {
		wait(capvcov1.WaitingForBootstrapDataReason, fmt.Sprintf("bootstrap data Secret %s has no key value", key.Name), waitPoll)
		return nil, nil
	}
	// The node joins with the labels the cluster's GPU add-on selects it by; an add-on the CRD
	// would refuse labels nothing (AddonsReady reports it).
	addon, _ := gpuaddon.Of(p.obs.where.cluster.Spec)
	userData, err := userdata.Build(data, string(secret.Data["format"]), p.m.Spec.GPU, gpuaddon.NodeLabels(addon, p.m.Spec.GPU))
	if err != nil {
		// A fixed spec comes as an event, fixed data does not.
		wait(capvcov1.BootstrapDataUnsupportedReason, err.Error(), unsupportedPoll)
		return nil, nil
	}
	return userData, nil
}

// attachGPUs reserves and attaches the machine's vGPUs; a machine whose recorded reservations
// are all attached costs no call (seen in the VM's devices when it was read this pass, from
// status otherwise).
func (r *machineProvider) attachGPUs(ctx context.Context, p *machinePass) error {
	m, obs := p.m, p.obs
	if obs.gpuWanted == 0 {
		return nil
	}
	gpuNames := make([]string, obs.gpuWanted)
	for i := range gpuNames {
		n, err := gpuname.Build(gpuname.Owner{Namespace: m.Namespace, Cluster: clusterOfMachine(p.scope), Machine: m.Name}, i)
		if err != nil {
			obs.gpuErr = err
			return nil // a name Kubernetes accepted cannot fail; reported, not retried
		}
		gpuNames[i] = n
	}
	if gpusAttached(m.Status.GPUs, obs.gpuWanted, obs.vm, obs.vmRead) {
		obs.gpus = m.Status.GPUs
		return nil
	}
	loc := obs.where.site.Location
	profiles, err := p.api.ListGPUProfiles(ctx, loc)
	if err != nil {
		obs.gpuErr = err
		return err
	}
	profile, err := decide.GPUProfile(*m.Spec.GPU, profiles)
	if err != nil {
		obs.gpuErr = err
		p.requeueAfter(time.Minute)
		return nil
	}
	got, err := gpu.Ensure(ctx, p.api, loc, obs.csID, obs.vm.ID, profile, gpuNames)
	obs.gpus, obs.gpusChanged, obs.gpuErr = []capvcov1.GPUStatus{}, true, err
	for _, g := range got {
		obs.gpus = append(obs.gpus, capvcov1.GPUStatus{Name: g.Name, ID: g.ID, ProfileID: g.ProfileID, Attached: g.Attached()})
	}
	return err
}

// gpusAttached says whether the recorded reservations are the wanted number and all attached:
// by the VM's devices when the VM was read, by status otherwise.
func gpusAttached(recorded []capvcov1.GPUStatus, wanted int, v *vco.VM, read bool) bool {
	if len(recorded) != wanted {
		return false
	}
	ids := make([]string, 0, len(recorded))
	for _, g := range recorded {
		if !read && !g.Attached {
			return false
		}
		ids = append(ids, g.ID)
	}
	return !read || gpu.AttachedTo(*v, ids)
}

func clusterOfMachine(s *machineScope) string {
	if s.Cluster != nil {
		return s.Cluster.Name
	}
	return s.Object.Labels[clusterv1.ClusterNameLabel]
}
