package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/gpu"
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
	// resync is how often a provisioned machine's VM is read back, so that a VM deleted out of
	// band is reported. Between reads, reconciles (status patches, CAPI's Machine updates)
	// reuse the VM last read: they are not news about the platform.
	resync time.Duration
	seen   sync.Map // types.UID -> seenVM
}

// DefaultMachineResync is the default Options.MachineResync.
const DefaultMachineResync = 10 * time.Minute

// unsupportedPoll is how often a machine whose user_data cannot be built reads its bootstrap
// Secret again (Secrets are not watched; a spec change reconciles at once).
const unsupportedPoll = 30 * time.Second

type seenVM struct {
	vm vco.VM
	at time.Time
}

// lastVM is the VM read for the machine within the resync period, if it was running.
func (p *machineProvider) lastVM(m *capvcov1.VCOMachine, id int) (vco.VM, bool) {
	e, ok := p.seen.Load(m.UID)
	if !ok {
		return vco.VM{}, false
	}
	s := e.(seenVM)
	return s.vm, s.vm.ID == id && vm.Running(s.vm) && time.Since(s.at) < p.resync
}

// machineObserved is what one reconcile of a VCOMachine saw.
type machineObserved struct {
	// waiting says what the machine waits for before its VM can exist (reason, message).
	waitReason, waitMessage string
	credentials             error
	vm                      *vco.VM
	vmErr                   error
	lost                    bool
	gpuWanted               int
	gpus                    []capvcov1.GPUStatus
	gpuErr                  error
	deleting                string
}

// site is where a machine runs: the VCOCluster, the site and its cloudspace.
type site struct {
	cluster    *capvcov1.VCOCluster
	site       decide.Site
	cloudspace capvcov1.CloudspaceStatus
}

// siteOf finds the machine's VCOCluster and its site's cloudspace; nil with a reason when it
// is not there yet.
func (p *machineProvider) siteOf(ctx context.Context, s *machineScope) (*site, string, string, error) {
	if s.Cluster == nil || !s.Cluster.Spec.InfrastructureRef.IsDefined() {
		return nil, capvcov1.WaitingForClusterReason, "the Cluster has no infrastructureRef yet", nil
	}
	vc := &capvcov1.VCOCluster{}
	err := p.client.Get(ctx, client.ObjectKey{Namespace: s.Object.Namespace, Name: s.Cluster.Spec.InfrastructureRef.Name}, vc)
	if apierrors.IsNotFound(err) {
		return nil, capvcov1.WaitingForClusterReason, fmt.Sprintf("VCOCluster %s does not exist", s.Cluster.Spec.InfrastructureRef.Name), nil
	}
	if err != nil {
		return nil, "", "", err
	}
	fd := ""
	if s.Machine != nil {
		fd = s.Machine.Spec.FailureDomain
	}
	st, ok := decide.SiteOf(decide.Sites(vc.Spec), fd)
	if !ok {
		return nil, capvcov1.WaitingForClusterReason, fmt.Sprintf("failure domain %q is not a site of VCOCluster %s", fd, vc.Name), nil
	}
	cs := cloudspaceStatus(vc, st.Name)
	if !ptr.Deref(vc.Status.Initialization.Provisioned, false) || cs.ID == "" {
		return nil, capvcov1.WaitingForClusterReason, fmt.Sprintf("VCOCluster %s is not provisioned yet", vc.Name), nil
	}
	return &site{cluster: vc, site: st, cloudspace: cs}, "", "", nil
}

func (p *machineProvider) api(ctx context.Context, vc *capvcov1.VCOCluster) (platform.Client, error) {
	return platform.ClientFor(ctx, p.client, p.platform, vc.Namespace, vc.Spec.CredentialsRef.Name)
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

// ReconcileNormal creates the VM once (found again by id or name), attaches its vGPUs and
// records providerID, addresses and the failure domain.
func (p *machineProvider) ReconcileNormal(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	obs := &machineObserved{gpuWanted: decide.GPUCount(s.Object.Spec.GPU)}
	s.Observed = obs
	m := s.Object
	where, reason, msg, err := p.siteOf(ctx, s)
	if err != nil || where == nil {
		obs.waitReason, obs.waitMessage = reason, msg
		return ctrl.Result{}, err
	}
	api, err := p.api(ctx, where.cluster)
	if obs.credentials = err; err != nil {
		return ctrl.Result{}, err
	}
	csID := where.cloudspace.ID
	if m.Status.CloudspaceID != "" {
		csID = m.Status.CloudspaceID
	}

	var v vco.VM
	if id := knownVMID(m); id != 0 {
		var fresh bool
		if v, fresh = p.lastVM(m, id); !fresh {
			v, err = vm.Get(ctx, api, csID, id)
		}
		if errors.Is(err, vm.ErrLost) {
			p.seen.Delete(m.UID)
			obs.lost, obs.vmErr = true, err
			if !ptr.Deref(m.Status.Initialization.Provisioned, false) || m.Status.VMID != nil {
				p.recorder.Eventf(m, corev1.EventTypeWarning, capvcov1.VMNotFoundEvent,
					"VM %d of this machine no longer exists on the platform; it is not recreated: delete the Machine to replace it", id)
			}
			return ctrl.Result{}, nil
		}
	} else {
		if s.Machine == nil || s.Machine.Spec.Bootstrap.DataSecretName == nil {
			obs.waitReason, obs.waitMessage = capvcov1.WaitingForBootstrapDataReason, "the Machine's bootstrap data Secret is not ready yet"
			return ctrl.Result{}, nil
		}
		v, err = p.createVM(ctx, s, api, where, csID, obs)
		if obs.waitReason == capvcov1.WaitingForBootstrapDataReason && err == nil {
			return ctrl.Result{RequeueAfter: waitPoll}, nil // Secrets are not watched
		}
		if obs.waitReason == capvcov1.BootstrapDataUnsupportedReason {
			return ctrl.Result{RequeueAfter: unsupportedPoll}, nil // a fixed spec comes as an event, fixed data does not
		}
		if obs.waitReason != "" {
			return ctrl.Result{}, err
		}
	}
	if obs.vmErr = err; err != nil {
		return ctrl.Result{}, err
	}
	obs.vm = &v
	if _, fresh := p.lastVM(m, v.ID); !fresh {
		p.seen.Store(m.UID, seenVM{vm: v, at: time.Now()})
	}
	setMachineVM(m, where, csID, v)

	if obs.gpuWanted > 0 {
		res, err := p.reconcileGPUs(ctx, s, api, where, csID, v)
		if err != nil || !res.IsZero() {
			return res, err
		}
	}
	if !vm.Running(v) {
		return ctrl.Result{RequeueAfter: waitPoll}, nil
	}
	return ctrl.Result{RequeueAfter: p.resync}, nil
}

func (p *machineProvider) createVM(ctx context.Context, s *machineScope, api platform.Client, where *site, csID string, obs *machineObserved) (vco.VM, error) {
	m := s.Object
	img, ok := decide.ImageFor(where.cluster.Spec, m.Spec.Image, where.site.Location)
	if !ok {
		obs.waitReason = capvcov1.LocationImageMissingReason
		obs.waitMessage = fmt.Sprintf("site %s is in location %s, which has no image in VCOCluster %s spec.geo.locationImages: images are per location; publish one there and add its id",
			where.site.Name, where.site.Location, where.cluster.Name)
		return vco.VM{}, nil
	}
	imageID, err := vm.Image(ctx, api, where.site.Location, img)
	if err != nil {
		return vco.VM{}, err
	}
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: m.Namespace, Name: *s.Machine.Spec.Bootstrap.DataSecretName}
	if err := p.client.Get(ctx, key, secret); err != nil {
		obs.waitReason, obs.waitMessage = capvcov1.WaitingForBootstrapDataReason, fmt.Sprintf("bootstrap data Secret %s: %v", key.Name, err)
		return vco.VM{}, client.IgnoreNotFound(err)
	}
	data := secret.Data["value"]
	if len(data) == 0 {
		obs.waitReason, obs.waitMessage = capvcov1.WaitingForBootstrapDataReason, fmt.Sprintf("bootstrap data Secret %s has no key value", key.Name)
		return vco.VM{}, nil
	}
	userData, err := userdata.Build(data, string(secret.Data["format"]), m.Spec.GPU)
	if err != nil {
		obs.waitReason, obs.waitMessage = capvcov1.BootstrapDataUnsupportedReason, err.Error()
		return vco.VM{}, nil
	}
	disks := make([]int, 0, len(m.Spec.DataDisksGiB))
	for _, d := range m.Spec.DataDisksGiB {
		disks = append(disks, int(d))
	}
	return vm.Ensure(ctx, api, csID, vco.CreateVMRequest{
		Name: names.VM(m.Name), Description: fmt.Sprintf("CAPVCO machine %s/%s", m.Namespace, m.Name), Hostname: m.Name,
		VCPUs: int(m.Spec.VCPUs), MemoryMiB: int(m.Spec.MemoryMiB), ImageID: imageID, BootDiskGiB: int(m.Spec.BootDiskGiB),
		DataDisksGiB: disks, UserData: string(userData),
	})
}

// reconcileGPUs reserves and attaches the machine's vGPUs; a machine whose recorded
// reservations are all attached (seen in the VM's devices) costs no call.
func (p *machineProvider) reconcileGPUs(ctx context.Context, s *machineScope, api platform.Client, where *site, csID string, v vco.VM) (ctrl.Result, error) {
	m, obs := s.Object, s.Observed
	gpuNames := make([]string, obs.gpuWanted)
	for i := range gpuNames {
		n, err := gpuname.Build(gpuname.Owner{Namespace: m.Namespace, Cluster: clusterOfMachine(s), Machine: m.Name}, i)
		if err != nil {
			obs.gpuErr = err
			return ctrl.Result{}, nil // a name Kubernetes accepted cannot fail; reported, not retried
		}
		gpuNames[i] = n
	}
	ids := make([]string, 0, len(m.Status.GPUs))
	for _, g := range m.Status.GPUs {
		ids = append(ids, g.ID)
	}
	if len(ids) == obs.gpuWanted && gpu.AttachedTo(v, ids) {
		obs.gpus = m.Status.GPUs
		return ctrl.Result{}, nil
	}
	profiles, err := api.ListGPUProfiles(ctx, where.site.Location)
	if err != nil {
		obs.gpuErr = err
		return ctrl.Result{}, err
	}
	profile, err := decide.GPUProfile(*m.Spec.GPU, profiles)
	if err != nil {
		obs.gpuErr = err
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	got, err := gpu.Ensure(ctx, api, where.site.Location, csID, v.ID, profile, gpuNames)
	m.Status.GPUs = nil
	for _, g := range got {
		m.Status.GPUs = append(m.Status.GPUs, capvcov1.GPUStatus{Name: g.Name, ID: g.ID, ProfileID: g.ProfileID, Attached: g.Attached()})
	}
	obs.gpus, obs.gpuErr = m.Status.GPUs, err
	return ctrl.Result{}, err
}

func clusterOfMachine(s *machineScope) string {
	if s.Cluster != nil {
		return s.Cluster.Name
	}
	return s.Object.Labels[clusterv1.ClusterNameLabel]
}

// ReconcileDelete stops and deletes the VM permanently, then releases the machine's vGPU
// reservations permanently.
func (p *machineProvider) ReconcileDelete(ctx context.Context, s *machineScope) (bool, ctrl.Result, error) {
	obs := &machineObserved{}
	s.Observed = obs
	m := s.Object
	p.seen.Delete(m.UID)
	vc := &capvcov1.VCOCluster{}
	var err error
	switch {
	case s.Cluster != nil && s.Cluster.Spec.InfrastructureRef.IsDefined():
		err = p.client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: s.Cluster.Spec.InfrastructureRef.Name}, vc)
	default:
		err = apierrors.NewNotFound(capvcov1.GroupVersion.WithResource("vcoclusters").GroupResource(), "")
	}
	if apierrors.IsNotFound(err) {
		// No VCOCluster: its teardown deleted the cloudspaces and released every reservation
		// of the cluster, this machine's included.
		return true, ctrl.Result{}, nil
	}
	if err != nil {
		return false, ctrl.Result{}, err
	}
	api, err := p.api(ctx, vc)
	if obs.credentials = err; err != nil {
		obs.deleting = "the credential Secret is needed to delete the VM: " + err.Error()
		return false, ctrl.Result{}, err
	}
	csID := m.Status.CloudspaceID
	loc := ""
	fd := m.Status.FailureDomain
	if st, ok := decide.SiteOf(decide.Sites(vc.Spec), fd); ok {
		loc = st.Location
		if csID == "" {
			csID = cloudspaceStatus(vc, st.Name).ID
		}
	}
	if csID != "" {
		obs.deleting = "stopping and deleting the VM permanently"
		if _, err := vm.Delete(ctx, api, csID, knownVMID(m), names.VM(m.Name)); err != nil {
			obs.deleting += ": " + err.Error()
			return false, ctrl.Result{}, err
		}
	}
	if loc != "" && (m.Spec.GPU != nil || len(m.Status.GPUs) > 0) {
		obs.deleting = "releasing the vGPU reservations permanently"
		owner := gpuname.Owner{Namespace: m.Namespace, Cluster: clusterOfMachine(s), Machine: m.Name}
		if _, err := gpu.Release(ctx, api, loc, func(n string) bool { return gpuname.OwnedByMachine(n, owner) }); err != nil {
			obs.deleting += ": " + err.Error()
			return false, ctrl.Result{}, err
		}
	}
	return true, ctrl.Result{}, nil
}

// UpdateStatus computes the VCOMachine's conditions and provisioned flag.
func (p *machineProvider) UpdateStatus(s *machineScope) {
	setMachineStatus(s.Object, s.Observed)
}
