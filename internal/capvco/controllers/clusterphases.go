package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/addons"
	"github.com/capx-io/capx/internal/capvco/cloudspace"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/dns"
	"github.com/capx-io/capx/internal/capvco/geo"
	"github.com/capx-io/capx/internal/capvco/health"
	"github.com/capx-io/capx/internal/capvco/loadbalancer"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/capvco/sriov"
	"github.com/capx-io/capx/internal/vco"
)

// clusterObserved is what one reconcile of a VCOCluster saw; each field names the phase that
// sets it. status.go turns it into status.
type clusterObserved struct {
	// now is the pass's time (the provider's clock), for what status records as checked.
	now time.Time
	// connect
	credentials error
	// checkLocationImages, keepRegistryCertificate (operator.go)
	missingImages []string
	images        *imagesObserved
	registry      *registryObserved
	// recallPlatform: the sites, load balancer and pool are status's record, not read this pass
	recalled bool
	// ensureCloudspaces
	sites []siteObserved
	// awaitCloudspaces: every site's cloudspace was looked at and all are deployed
	sitesDone bool
	// ensureLoadBalancer: the endpoint (lb and pool nil until it exists)
	lb     *vco.LoadBalancer
	pool   *vco.ServerPool
	lbErr  error
	lbDone bool
	// ensureLoadBalancer: the cloudspaces, load balancer and pool were all read this pass
	platformRead bool
	// ensureDNS
	dnsProgress *dns.Progress
	dnsErr      error
	// ensureMesh
	mesh    *geo.Mesh
	meshErr error
	// syncMembers: the pool's members after the sync (nil: not synced this pass)
	members    []string
	membersErr error
	// deliverAddons (nil: not looked at this pass)
	addons *addons.Observed
	// observeSRIOV (nil: SRIOVAgentReady not looked at this pass)
	sriov *sriov.Readiness
	// ReconcileDelete
	teardown       teardownProgress
	teardownActive bool
}

type siteObserved struct {
	site decide.Site
	// recorded is the site's status entry the pass started from (the live one when the cache
	// had none).
	recorded capvcov1.CloudspaceStatus
	cloudspace.Observed
	err error
}

func (o *clusterObserved) primary() siteObserved { return o.sites[0] }

// recallPlatform takes the sites' cloudspaces, the load balancer and its pool (its members'
// addresses) from status while no read is due (decide.PlatformReadDue): then the pass reads
// none of them, unless the API servers that answer are not the recorded members (syncMembers).
func (r *clusterProvider) recallPlatform(_ context.Context, p *clusterPass) error {
	due, next := decide.PlatformReadDue(p.vc, r.resync, p.obs.now)
	if due {
		return nil
	}
	p.requeueAfter(next)
	for _, site := range decide.Sites(p.vc.Spec) {
		rec := cloudspaceStatus(p.vc, site.Name)
		p.obs.sites = append(p.obs.sites, siteObserved{site: site, recorded: rec, Observed: cloudspace.Observed{Cloudspace: vco.Cloudspace{
			ID: rec.ID, Name: rec.Name, Location: rec.Location, Status: "DEPLOYED", ExternalNetworkIP: rec.ExternalIP}}})
	}
	st := p.vc.Status.LoadBalancer
	pool := &vco.ServerPool{ID: st.ServerPoolID}
	for _, a := range st.Members {
		pool.Hosts = append(pool.Hosts, vco.PoolHost{Address: a})
	}
	lb := &vco.LoadBalancer{ID: st.ID, FrontEnd: vco.LBFrontEnd{Port: lbPort(p.vc), IPAddress: st.Address},
		BackEnd: vco.LBBackEnd{ServerPoolID: st.ServerPoolID, TargetPort: decide.DefaultAPIServerPort}}
	p.obs.recalled, p.obs.lb, p.obs.pool, p.obs.lbDone = true, lb, pool, true
	return nil
}

// ensureCloudspaces finds, adopts or creates each site's cloudspace. A cloudspace found by name
// while the cached status had none is checked against the live status first: this
// controller's own create, patched a moment ago, is not an adoption.
func (r *clusterProvider) ensureCloudspaces(ctx context.Context, p *clusterPass) error {
	if p.obs.recalled {
		return nil
	}
	var live *capvcov1.VCOCluster
	for _, site := range decide.Sites(p.vc.Spec) {
		so := siteObserved{site: site}
		known := cloudspaceStatus(p.vc, site.Name)
		if known.ID == "" {
			if live == nil {
				if live, so.err = r.liveCluster(ctx, p.vc); so.err != nil {
					p.obs.sites = append(p.obs.sites, so)
					return so.err
				}
			}
			known = cloudspaceStatus(live, site.Name)
		}
		so.recorded = known
		so.Observed, so.err = cloudspace.Ensure(ctx, p.api, known.ID, cloudspaceRequest(p.vc, p.cluster, site))
		p.obs.sites = append(p.obs.sites, so)
		if so.err != nil {
			return so.err
		}
		if so.Adopted && so.LiveVMs > 0 && !known.Adopted {
			r.recorder.Eventf(p.vc, corev1.EventTypeWarning, capvcov1.AdoptedLiveCloudspaceEvent,
				"Adopted cloudspace %s (%s) of site %s by name, and it already runs %d VMs: if this is not a move of this cluster, another VCOCluster or management cluster manages the same infrastructure, and deleting either destroys it",
				so.Cloudspace.Name, so.Cloudspace.ID, site.Name, so.LiveVMs)
		}
	}
	return nil
}

// liveCluster reads the VCOCluster past the cache (vc itself when it is gone meanwhile).
func (r *clusterProvider) liveCluster(ctx context.Context, vc *capvcov1.VCOCluster) (*capvcov1.VCOCluster, error) {
	live := &capvcov1.VCOCluster{}
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(vc), live); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return vc, nil
		}
		return nil, err
	}
	return live, nil
}

// awaitCloudspaces stops the pass while a site's cloudspace is lost (a person has to act: look
// now and then) or not deployed yet.
func (r *clusterProvider) awaitCloudspaces(_ context.Context, p *clusterPass) error {
	for _, so := range p.obs.sites {
		switch {
		case so.Lost:
			p.stop = true
			p.requeueAfter(time.Minute)
			return nil
		case !so.Deployed():
			p.stop = true
			p.requeueAfter(waitPoll)
			return nil
		}
	}
	p.obs.sitesDone = true
	return nil
}

// ensureLoadBalancer keeps the control-plane load balancer and its pool on the primary
// cloudspace's external address.
func (r *clusterProvider) ensureLoadBalancer(ctx context.Context, p *clusterPass) error {
	if p.obs.recalled {
		return nil
	}
	err := r.readLoadBalancer(ctx, p)
	p.obs.platformRead = err == nil
	return err
}

// readLoadBalancer reads (or creates) the load balancer and its pool.
func (r *clusterProvider) readLoadBalancer(ctx context.Context, p *clusterPass) error {
	primary := p.obs.primary()
	known := loadbalancer.Known{}
	if st := p.vc.Status.LoadBalancer; st != nil {
		known = loadbalancer.Known{LoadBalancerID: st.ID, ServerPoolID: st.ServerPoolID}
	}
	lb, pool, err := loadbalancer.Ensure(ctx, p.api, primary.Cloudspace.ID, names.APIServer(p.vc.Namespace, p.cluster),
		primary.Cloudspace.ExternalNetworkIP, lbPort(p.vc), known)
	if p.obs.lbErr = err; err != nil {
		return err
	}
	p.obs.lb, p.obs.pool, p.obs.lbDone = &lb, &pool, true
	return nil
}

// ensureDNS makes sure the A record is written (in the background: a write takes ~30 s); while
// the platform is recalled from status (recallPlatform), a record status says is published is not
// listed again.
func (r *clusterProvider) ensureDNS(ctx context.Context, p *clusterPass) error {
	if p.vc.Spec.DNS == nil {
		return nil
	}
	if rec := p.vc.Status.DNS; p.obs.recalled && rec != nil && rec.Published && rec.Name == p.vc.Spec.DNS.Name {
		p.obs.dnsProgress = &dns.Progress{Done: true} // published as of the last read (recallPlatform)
		return nil
	}
	prog, err := r.dns.Ensure(ctx, p.api, p.obs.primary().Cloudspace.ID, p.vc.Spec.DNS.Name, r.notify(p.vc))
	p.obs.dnsProgress, p.obs.dnsErr = &prog, err
	return err
}

// ensureMesh links every pair of sites of a geo cluster.
func (r *clusterProvider) ensureMesh(ctx context.Context, p *clusterPass) error {
	if len(p.obs.sites) < 2 {
		return nil
	}
	members := make([]geo.Member, 0, len(p.obs.sites))
	for _, s := range p.obs.sites {
		members = append(members, geo.Member{Site: s.site.Name, CloudspaceID: s.Cloudspace.ID, ExternalIP: s.Cloudspace.ExternalNetworkIP})
	}
	mesh, err := geo.Ensure(ctx, p.api, members)
	p.obs.mesh, p.obs.meshErr = &mesh, err
	return err
}

// syncMembers probes the control-plane machines' API servers and makes the pool's hosts
// exactly the ones that answered. With the pool recalled from status, a pass whose answering
// API servers are the recorded members costs no call; otherwise the pool and its load balancer
// are read first, and the probe covers the hosts the platform has.
func (r *clusterProvider) syncMembers(ctx context.Context, p *clusterPass) error {
	var machines capvcov1.VCOMachineList
	if err := r.client.List(ctx, &machines, client.InNamespace(p.vc.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: p.cluster}, client.HasLabels{clusterv1.MachineControlPlaneLabel}); err != nil {
		p.obs.membersErr = err
		return err
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
	healthy := health.Healthy(ctx, r.prober, decide.ProbeSet(candidates, leaving, p.obs.pool.Hosts), decide.DefaultAPIServerPort)
	if p.obs.recalled && !decide.SameMembers(healthy, hostAddresses(p.obs.pool.Hosts)) {
		if err := r.readLoadBalancer(ctx, p); err != nil {
			p.obs.membersErr = err
			return err
		}
		healthy = health.Healthy(ctx, r.prober, decide.ProbeSet(candidates, leaving, p.obs.pool.Hosts), decide.DefaultAPIServerPort)
	}
	members, err := loadbalancer.SyncMembers(ctx, p.api, p.obs.primary().Cloudspace.ID, *p.obs.pool, healthy)
	if members == nil {
		members = []string{}
	}
	p.obs.members, p.obs.membersErr = members, err
	return err
}
