package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/capvco/cloudspace"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/dns"
	"github.com/capx-io/capx/internal/capvco/geo"
	"github.com/capx-io/capx/internal/capvco/gpu"
	"github.com/capx-io/capx/internal/capvco/gpuname"
	"github.com/capx-io/capx/internal/capvco/health"
	"github.com/capx-io/capx/internal/capvco/loadbalancer"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/capvco/platform"
	"github.com/capx-io/capx/internal/capvco/vm"
	"github.com/capx-io/capx/internal/vco"
)

type clusterScope = capi.Scope[*capvcov1.VCOCluster, *clusterObserved]

// clusterProvider is the VCOCluster's phases.
type clusterProvider struct {
	client   client.Client
	platform platform.Factory
	prober   health.Prober
	dns      *dns.Writer
	recorder record.EventRecorder
	dnsDone  chan event.GenericEvent
	// created remembers the cloudspaces this process created (VCOCluster UID/site -> id), so
	// that a reconcile reading a cache older than its own status patch does not mistake its
	// own cloudspace for an adopted one.
	created sync.Map
	// operator remembers the outcomes of the operator-privileged actions (operator.go).
	operator memo
}

// waitPoll is how soon a reconcile looks again at something the platform is still doing.
const waitPoll = 2 * time.Second

// clusterObserved is what one reconcile of a VCOCluster saw; status.go turns it into status.
type clusterObserved struct {
	credentials error
	sites       []siteObserved
	// sitesDone: every site's cloudspace was looked at (and all are deployed).
	sitesDone      bool
	missingImages  []string
	images         *imagesObserved
	registry       *registryObserved
	lbErr          error
	lbDone         bool
	membersErr     error
	dnsProgress    *dns.Progress
	dnsErr         error
	mesh           *geo.Mesh
	meshErr        error
	teardown       teardownProgress
	teardownActive bool
}

type siteObserved struct {
	site decide.Site
	cloudspace.Observed
	err error
}

func (o *clusterObserved) siteByName(name string) *siteObserved {
	for i := range o.sites {
		if o.sites[i].site.Name == name {
			return &o.sites[i]
		}
	}
	return nil
}

// clusterName is the CAPI Cluster's name: the owner, else the cluster-name label.
func clusterName(s *clusterScope) string {
	if s.Cluster != nil {
		return s.Cluster.Name
	}
	return s.Object.Labels[clusterv1.ClusterNameLabel]
}

func (p *clusterProvider) api(ctx context.Context, vc *capvcov1.VCOCluster) (platform.Client, error) {
	return platform.ClientFor(ctx, p.client, p.platform, vc.Namespace, vc.Spec.CredentialsRef.Name)
}

// ReconcileNormal provisions the sites' cloudspaces, the control-plane endpoint, DNS and the
// geo mesh, then keeps the server pool's members healthy.
func (p *clusterProvider) ReconcileNormal(ctx context.Context, s *clusterScope) (ctrl.Result, error) {
	obs := &clusterObserved{}
	s.Observed = obs
	vc := s.Object
	api, err := p.api(ctx, vc)
	if obs.credentials = err; err != nil {
		return ctrl.Result{}, err
	}
	cluster := clusterName(s)
	obs.missingImages = decide.MissingLocationImages(vc.Spec)
	obs.images = p.reconcileLocationImages(ctx, vc, api)
	obs.registry = p.reconcileRegistryCertificate(ctx, vc)

	for _, site := range decide.Sites(vc.Spec) {
		so := siteObserved{site: site}
		known := cloudspaceStatus(vc, site.Name)
		so.Observed, so.err = cloudspace.Ensure(ctx, api, known.ID, cloudspaceRequest(vc, cluster, site))
		key := string(vc.UID) + "/" + site.Name
		if so.err == nil && known.ID == "" && !so.Adopted {
			p.created.Store(key, so.Cloudspace.ID)
		}
		if id, ok := p.created.Load(key); ok && so.Adopted && id == so.Cloudspace.ID {
			so.Adopted, so.LiveVMs = false, 0
		}
		obs.sites = append(obs.sites, so)
		if so.err != nil {
			return ctrl.Result{}, so.err
		}
		if so.Adopted && so.LiveVMs > 0 && !known.Adopted {
			p.recorder.Eventf(vc, corev1.EventTypeWarning, capvcov1.AdoptedLiveCloudspaceEvent,
				"Adopted cloudspace %s (%s) of site %s by name, and it already runs %d VMs: if this is not a move of this cluster, another VCOCluster or management cluster manages the same infrastructure, and deleting either destroys it",
				so.Cloudspace.Name, so.Cloudspace.ID, site.Name, so.LiveVMs)
		}
		setCloudspaceStatus(vc, so)
	}
	for _, so := range obs.sites {
		if so.Lost {
			return ctrl.Result{RequeueAfter: time.Minute}, nil // a person has to act; look now and then
		}
		if !so.Deployed() {
			return ctrl.Result{RequeueAfter: waitPoll}, nil
		}
	}
	obs.sitesDone = true
	primary := obs.sites[0]

	port := lbPort(vc)
	known := loadbalancer.Known{}
	if vc.Status.LoadBalancer != nil {
		known = loadbalancer.Known{LoadBalancerID: vc.Status.LoadBalancer.ID, ServerPoolID: vc.Status.LoadBalancer.ServerPoolID}
	}
	lb, pool, err := loadbalancer.Ensure(ctx, api, primary.Cloudspace.ID, names.APIServer(vc.Namespace, cluster), primary.Cloudspace.ExternalNetworkIP, port, known)
	if obs.lbErr = err; err != nil {
		return ctrl.Result{}, err
	}
	obs.lbDone = true
	setLoadBalancerStatus(vc, lb.ID, pool.ID, primary.Cloudspace.ExternalNetworkIP, hostAddresses(pool.Hosts))
	setEndpoint(vc, primary.Cloudspace.ExternalNetworkIP, port)

	if vc.Spec.DNS != nil {
		prog, err := p.dns.Ensure(ctx, api, primary.Cloudspace.ID, vc.Spec.DNS.Name, p.notify(vc))
		obs.dnsProgress, obs.dnsErr = &prog, err
		setDNSStatus(vc, prog.Done)
		if err != nil {
			return ctrl.Result{}, err
		}
	}

	if len(obs.sites) > 1 {
		mesh, err := geo.Ensure(ctx, api, meshMembers(obs.sites))
		obs.mesh, obs.meshErr = &mesh, err
		if err != nil {
			return ctrl.Result{}, err
		}
	}

	members, err := p.reconcileMembers(ctx, s, api, primary.Cloudspace.ID, pool)
	obs.membersErr = err
	setLoadBalancerStatus(vc, lb.ID, pool.ID, primary.Cloudspace.ExternalNetworkIP, members)
	if err != nil {
		return ctrl.Result{}, err
	}

	next := healthInterval(vc)
	if (obs.dnsProgress != nil && !obs.dnsProgress.Done) || (obs.mesh != nil && !obs.mesh.Connected()) {
		next = min(next, waitPoll)
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// reconcileMembers probes the control-plane machines' API servers and makes the pool's hosts
// exactly the ones that answered.
func (p *clusterProvider) reconcileMembers(ctx context.Context, s *clusterScope, api platform.Client, cloudspaceID string, pool vco.ServerPool) ([]string, error) {
	var machines capvcov1.VCOMachineList
	if err := p.client.List(ctx, &machines, client.InNamespace(s.Object.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName(s)}, client.HasLabels{clusterv1.MachineControlPlaneLabel}); err != nil {
		return nil, err
	}
	var candidates, leaving []string
	for _, m := range machines.Items {
		ip := internalIP(m.Status.Addresses)
		switch {
		case ip == "":
		case m.DeletionTimestamp.IsZero():
			candidates = append(candidates, ip)
		default:
			leaving = append(leaving, ip)
		}
	}
	healthy := health.Healthy(ctx, p.prober, decide.ProbeSet(candidates, leaving, pool.Hosts), decide.DefaultAPIServerPort)
	return loadbalancer.SyncMembers(ctx, api, cloudspaceID, pool, healthy)
}

// notify returns the callback a background DNS write calls when it ends.
func (p *clusterProvider) notify(vc *capvcov1.VCOCluster) func() {
	key := &capvcov1.VCOCluster{}
	key.Namespace, key.Name = vc.Namespace, vc.Name
	return func() {
		select {
		case p.dnsDone <- event.GenericEvent{Object: key}:
		default: // the periodic requeue picks it up
		}
	}
}

// UpdateStatus computes the VCOCluster's conditions and provisioned flag.
func (p *clusterProvider) UpdateStatus(s *clusterScope) {
	setClusterStatus(s.Object, s.Observed)
}

// teardownStep is one stage of a VCOCluster's deletion, in order.
type teardownStep int

const (
	stepMachines teardownStep = iota
	stepVMs
	stepGPUs
	stepLoadBalancer
	stepDNS
	stepRegistryCertificate
	stepLinks
	stepCloudspaces
	stepDone
)

var stepNames = [...]string{
	"waiting for the cluster's VCOMachines to be deleted",
	"deleting the VMs left in the cloudspaces",
	"releasing the cluster's vGPU reservations",
	"deleting the control-plane load balancer and server pool",
	"deleting the DNS record",
	"deleting the registry certificate from the SSL certificate store",
	"deleting the connected-cloudspace links",
	"deleting the cloudspaces",
	"done",
}

type teardownProgress struct {
	step   teardownStep
	detail string
	err    error
	// tolerated are link deletes that kept failing; the cloudspace delete removes them.
	tolerated []string
	// left says what teardown had to leave behind and why ("" when nothing).
	left string
}

func (t teardownProgress) message() string {
	msg := fmt.Sprintf("step %d/%d: %s", int(t.step)+1, int(stepDone), stepNames[t.step])
	if t.detail != "" {
		msg += " (" + t.detail + ")"
	}
	if len(t.tolerated) > 0 {
		msg += fmt.Sprintf("; link deletes tolerated after %d failed attempts each: %s", geo.DeleteAttempts, strings.Join(t.tolerated, ", "))
	}
	if t.left != "" {
		msg += "; " + t.left
	}
	if t.err != nil {
		msg += ": " + t.err.Error()
	}
	return msg
}

// ReconcileDelete tears the cluster down in order: VMs, vGPU reservations, the load balancer,
// DNS, links, then the cloudspaces, everything permanently. Every step is idempotent and looks
// things up by name, so it resumes after any failure, restart or status loss.
func (p *clusterProvider) ReconcileDelete(ctx context.Context, s *clusterScope) (bool, ctrl.Result, error) {
	obs := &clusterObserved{teardownActive: true}
	s.Observed = obs
	t := &obs.teardown
	vc := s.Object
	cluster := clusterName(s)

	var machines capvcov1.VCOMachineList
	if err := p.client.List(ctx, &machines, client.InNamespace(vc.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		t.err = err
		return false, ctrl.Result{}, err
	}
	if n := len(machines.Items); n > 0 {
		t.detail = fmt.Sprintf("%d left", n)
		return false, ctrl.Result{}, nil // their deletion brings the cluster back
	}

	api, err := p.api(ctx, vc)
	if obs.credentials = err; err != nil {
		t.err = err
		return false, ctrl.Result{}, err
	}
	sites := decide.Sites(vc.Spec)
	ids := make([]string, len(sites))
	for i, site := range sites {
		ids[i] = cloudspaceStatus(vc, site.Name).ID
		if ids[i] == "" {
			cs, err := api.FindCloudspace(ctx, site.Location, names.Cloudspace(vc.Namespace, cluster, site.Name))
			switch {
			case err == nil:
				ids[i] = cs.ID
			case !isNotFound(err):
				t.err = err
				return false, ctrl.Result{}, err
			}
		}
	}
	fail := func(err error) (bool, ctrl.Result, error) { t.err = err; return false, ctrl.Result{}, err }

	t.step = stepVMs
	for i, id := range ids {
		if id == "" {
			continue
		}
		vms, err := api.ListVMs(ctx, id, true)
		if isNotFound(err) {
			ids[i] = ""
			continue
		}
		if err != nil {
			return fail(err)
		}
		for _, v := range vms {
			if _, err := vm.Delete(ctx, api, id, v.ID, v.Name); err != nil {
				return fail(err)
			}
		}
	}

	t.step = stepGPUs
	owned := func(name string) bool { return gpuname.OwnedByCluster(name, vc.Namespace, cluster) }
	for _, loc := range locations(sites) {
		if _, err := gpu.Release(ctx, api, loc, owned); err != nil {
			return fail(err)
		}
	}

	t.step = stepLoadBalancer
	if ids[0] != "" {
		if _, err := loadbalancer.Delete(ctx, api, ids[0], names.APIServer(vc.Namespace, cluster)); err != nil {
			return fail(err)
		}
	}

	t.step = stepDNS
	if vc.Spec.DNS != nil && ids[0] != "" {
		prog, err := p.dns.Delete(ctx, api, ids[0], vc.Spec.DNS.Name, p.notify(vc))
		if err != nil {
			return fail(err)
		}
		if prog.Err != nil {
			t.err = prog.Err
		}
		if !prog.Done {
			t.detail = fmt.Sprintf("%s, a platform DNS write takes about 30 s", vc.Spec.DNS.Name)
			return false, ctrl.Result{RequeueAfter: waitPoll}, nil
		}
	}

	t.step = stepRegistryCertificate
	note, err := p.deleteRegistryCertificate(ctx, vc)
	if err != nil {
		return fail(err)
	}
	t.left = note

	t.step = stepLinks
	var members []geo.Member
	for i, id := range ids {
		if id != "" {
			members = append(members, geo.Member{Site: sites[i].Name, CloudspaceID: id})
		}
	}
	if len(sites) > 1 {
		tolerated, err := geo.Delete(ctx, api, members)
		t.tolerated = tolerated
		if err != nil {
			return fail(err)
		}
	}

	t.step = stepCloudspaces
	for i, site := range sites {
		if _, err := cloudspace.Delete(ctx, api, ids[i], site.Location, names.Cloudspace(vc.Namespace, cluster, site.Name)); err != nil {
			return fail(err)
		}
	}
	t.step = stepDone
	for _, site := range sites {
		p.created.Delete(string(vc.UID) + "/" + site.Name)
	}
	p.operator.forget(string(vc.UID))
	return true, ctrl.Result{}, nil
}

func isNotFound(err error) bool { return err != nil && errors.Is(err, vco.ErrNotFound) }

func isForbidden(err error) bool { return err != nil && errors.Is(err, vco.ErrForbidden) }

func locations(sites []decide.Site) []string {
	var out []string
	for _, s := range sites {
		if !slices.Contains(out, s.Location) {
			out = append(out, s.Location)
		}
	}
	return out
}

func meshMembers(sites []siteObserved) []geo.Member {
	out := make([]geo.Member, 0, len(sites))
	for _, s := range sites {
		out = append(out, geo.Member{Site: s.site.Name, CloudspaceID: s.Cloudspace.ID, ExternalIP: s.Cloudspace.ExternalNetworkIP})
	}
	return out
}

func internalIP(addrs []clusterv1.MachineAddress) string {
	for _, a := range addrs {
		if a.Type == clusterv1.MachineInternalIP {
			return a.Address
		}
	}
	return ""
}

func lbPort(vc *capvcov1.VCOCluster) int {
	if p := vc.Spec.ControlPlaneLoadBalancer.Port; p > 0 {
		return int(p)
	}
	return decide.DefaultAPIServerPort
}

func healthInterval(vc *capvcov1.VCOCluster) time.Duration {
	s := vc.Spec.ControlPlaneLoadBalancer.HealthCheckIntervalSeconds
	if s <= 0 {
		s = decide.DefaultHealthCheckInterval
	}
	return time.Duration(s) * time.Second
}
