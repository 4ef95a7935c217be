package controllers

import (
	"context"
	"errors"
	"slices"
	"time"

	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/capvco/addons"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/dns"
	"github.com/capx-io/capx/internal/capvco/health"
	"github.com/capx-io/capx/internal/capvco/platform"
	"github.com/capx-io/capx/internal/vco"
)

type clusterScope = capi.Scope[*capvcov1.VCOCluster, *clusterObserved]

// clusterProvider is the VCOCluster's phases.
type clusterProvider struct {
	client client.Client
	// reader reads the API server directly: a cloudspace found by name is checked against the
	// VCOCluster's live status before it counts as adopted (the cache may predate this
	// controller's own status patch).
	reader   client.Reader
	platform platform.Factory
	prober   health.Prober
	dns      *dns.Writer
	addons   *addons.Delivery
	recorder record.EventRecorder
	clock    clock.PassiveClock
	dnsDone  chan event.GenericEvent
	// resync is how often the cloudspaces, the load balancer and its pool are read back while
	// nothing else makes a read due (decide.PlatformReadDue): between reads, reconciles use
	// what status recorded.
	resync time.Duration
}

// waitPoll is how soon a reconcile looks again at something the platform is still doing.
const waitPoll = 2 * time.Second

// clusterPass is one reconcile of a VCOCluster: its phases run in order over it, each recording
// what it saw in obs, from which status.go computes the status.
type clusterPass struct {
	vc      *capvcov1.VCOCluster
	cluster string // the CAPI Cluster's name
	obs     *clusterObserved
	// api is the cluster credential's client (connect).
	api platform.Client
	// stop ends the pass after the current phase, without an error (something is not there
	// yet; requeue says when to look again).
	stop    bool
	requeue time.Duration
}

func (p *clusterPass) requeueAfter(d time.Duration) {
	if d > 0 && (p.requeue == 0 || d < p.requeue) {
		p.requeue = d
	}
}

func (p *clusterPass) result() ctrl.Result { return ctrl.Result{RequeueAfter: p.requeue} }

// clusterPhase is one step of a VCOCluster reconcile.
type clusterPhase func(ctx context.Context, p *clusterPass) error

// runCluster runs phases in order until one fails or stops the pass.
func runCluster(ctx context.Context, p *clusterPass, phases ...clusterPhase) error {
	for _, ph := range phases {
		if err := ph(ctx, p); err != nil || p.stop {
			return err
		}
	}
	return nil
}

func (r *clusterProvider) newPass(s *clusterScope, teardown bool) *clusterPass {
	s.Observed = &clusterObserved{teardownActive: teardown, now: r.clock.Now()}
	return &clusterPass{vc: s.Object, cluster: clusterName(s), obs: s.Observed}
}

// ReconcileNormal provisions the sites' cloudspaces, the control-plane endpoint, DNS and the
// geo mesh, keeps the server pool's members healthy and delivers the add-ons. Each phase
// observes what it needs and makes the platform calls its piece takes; none writes status.
func (r *clusterProvider) ReconcileNormal(ctx context.Context, s *clusterScope) (ctrl.Result, error) {
	p := r.newPass(s, false)
	err := runCluster(ctx, p,
		r.connect,                 // observe: the cluster credential's client
		r.checkLocationImages,     // operator: every site's location sees its image (operator.go)
		r.keepRegistryCertificate, // operator: the registry certificate in the store (operator.go)
		r.recallPlatform,          // observe: the cloudspaces, load balancer and pool from status while no read is due
		r.ensureCloudspaces,       // act: each site's cloudspace, found, adopted or created
		r.awaitCloudspaces,        // wait: a lost cloudspace needs a person, a deploying one time
		r.ensureLoadBalancer,      // act: the control-plane load balancer and its pool
		r.ensureDNS,               // act: the endpoint's A record, written in the background
		r.ensureMesh,              // act: links between the sites
		r.syncMembers,             // act: the pool holds exactly the API servers that answer (read when they changed)
		r.deliverAddons,           // act: the add-ons in the workload cluster (addons.go)
		r.observeSRIOV,            // observe: the SR-IOV agent's credential and DaemonSet (sriov.go)
	)
	if err == nil {
		p.requeueAfter(healthInterval(p.vc))
		if (p.obs.dnsProgress != nil && !p.obs.dnsProgress.Done) || (p.obs.mesh != nil && !p.obs.mesh.Connected()) {
			p.requeueAfter(waitPoll)
		}
	}
	return p.result(), err
}

// UpdateStatus computes the VCOCluster's status from what the pass observed.
func (r *clusterProvider) UpdateStatus(s *clusterScope) {
	setClusterStatus(s.Object, s.Observed)
}

// connect builds the cluster credential's client.
func (r *clusterProvider) connect(ctx context.Context, p *clusterPass) error {
	api, err := platform.ClientFor(ctx, r.client, r.platform, p.vc.Namespace, p.vc.Spec.CredentialsRef.Name)
	p.obs.credentials, p.api = err, api
	return err
}

// notify returns the callback a background DNS write calls when it ends.
func (r *clusterProvider) notify(vc *capvcov1.VCOCluster) func() {
	key := &capvcov1.VCOCluster{}
	key.Namespace, key.Name = vc.Namespace, vc.Name
	return func() {
		select {
		case r.dnsDone <- event.GenericEvent{Object: key}:
		default: // the periodic requeue picks it up
		}
	}
}

// clusterName is the CAPI Cluster's name: the owner, else the cluster-name label.
func clusterName(s *clusterScope) string {
	if s.Cluster != nil {
		return s.Cluster.Name
	}
	return s.Object.Labels[clusterv1.ClusterNameLabel]
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
