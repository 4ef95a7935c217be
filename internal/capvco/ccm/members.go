package ccm

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// MembersControllerName is the controller that keeps Service pool members healthy; it runs
// beside the cloud-provider controllers and, like them, only on the leader.
const MembersControllerName = "capvco-service-lb-members"

// MembersController re-decides the members of every load-balanced Service's server pools on a
// period: the service controller calls the CCM only when the set of nodes changes, never when
// a node's readiness or health does, and the platform load balancer checks nothing itself.
type MembersController struct {
	cloud    *Cloud
	services corelisters.ServiceLister
	nodes    corelisters.NodeLister
	synced   []cache.InformerSynced
	interval time.Duration
}

// NewMembersController reads Services and Nodes from the informers.
func NewMembersController(cloud *Cloud, services coreinformers.ServiceInformer, nodes coreinformers.NodeInformer) *MembersController {
	return &MembersController{
		cloud: cloud, services: services.Lister(), nodes: nodes.Lister(),
		synced:   []cache.InformerSynced{services.Informer().HasSynced, nodes.Informer().HasSynced},
		interval: cloud.cfg.LoadBalancer.HealthCheckInterval(),
	}
}

// Run syncs every interval until ctx ends.
func (m *MembersController) Run(ctx context.Context) {
	log := klog.FromContext(ctx).WithName(MembersControllerName)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, m.synced...) {
		return
	}
	log.Info("Starting", "interval", m.interval)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := m.Sync(ctx); err != nil {
			log.Error(err, "Keeping Service load balancer members")
		}
	}, m.interval)
}

// Sync is one pass over every Service.
func (m *MembersController) Sync(ctx context.Context) error {
	services, err := m.services.List(labels.Everything())
	if err != nil {
		return err
	}
	nodes, err := m.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	return m.cloud.SyncMembers(ctx, services, nodes)
}
