// Package controllers wires the CAPVCO kinds into the shared CAPI plumbing (internal/capi). Each
// kind's provider is a list of phases over one pass (cluster.go with clusterphases.go and
// operator.go, teardown.go, machine.go with machinedelete.go): a phase observes, or makes the
// platform calls of one piece, and records what it saw in the pass's observation; none writes
// status. Decisions live in internal/capvco/decide, platform calls in the service packages
// (cloudspace, loadbalancer, dns, geo, vm, gpu), and every status field is written by the pure
// setters in status.go, from the observation, just before the single patch.
package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/capvco/addons"
	"github.com/capx-io/capx/internal/capvco/dns"
	"github.com/capx-io/capx/internal/capvco/health"
	"github.com/capx-io/capx/internal/capvco/platform"
	"github.com/capx-io/capx/internal/capvco/vm"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/version"
)

// Options configure the CAPVCO controllers.
type Options struct {
	// WatchFilter limits the controllers to objects with this watch-filter label value.
	WatchFilter string
	// ClusterConcurrency and MachineConcurrency cap concurrent reconciles per kind.
	ClusterConcurrency, MachineConcurrency int
	// Platform turns credential Secrets into whitesky.cloud clients; nil means the real
	// client (vco.NewFactory). Tests point it at an in-process simulator.
	Platform platform.Factory
	// Prober checks control-plane API servers for load-balancer membership; nil means a TLS
	// handshake with <address>:6443.
	Prober health.Prober
	// MachineResync is how often a provisioned machine's VM is read back to notice a VM lost
	// out of band, and a VCOCluster's cloudspaces, load balancer and pool while nothing else
	// makes their read due (default DefaultMachineResync).
	MachineResync time.Duration
	// AllowHTTP and AllowedHosts are the manager's --vco-allow-http and --vco-allowed-hosts:
	// where the real client (Platform nil) lets credential Secrets point it.
	AllowHTTP    bool
	AllowedHosts []string
	// Clock is what the controllers read the time from; nil means the real clock. What status
	// records as checked and every "look again" rule (decide) use it.
	Clock clock.PassiveClock
	// Addons configure the add-ons delivered into every workload cluster.
	Addons AddonOptions
}

// AddonOptions configure the add-on delivery (docs/capvco/addons.md).
type AddonOptions struct {
	// Version tags the project's add-on images and is recorded in status.addons; default the
	// manager's own version, so upgrading the manager upgrades the add-ons in place.
	Version string
	// ImageRepository is where the project's images are (default addons.DefaultImageRepository).
	ImageRepository string
	// Images override single components' images (the manager's --capvco-addon-image).
	Images map[string]string
	// Connect builds a client of a workload cluster from its kubeconfig; nil means the real one.
	Connect func(kubeconfig []byte) (client.Client, error)
	// Resync and Poll: how often an available add-on is checked again, and how soon one that is
	// not (defaults in internal/capvco/decide).
	Resync, Poll time.Duration
}

// Setup registers the CAPVCO controllers with the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if opts.Platform == nil {
		opts.Platform = platform.VCOFactory{Factory: vco.NewFactory(vco.Options{Logger: mgr.GetLogger().WithName("vco"),
			AllowHTTP: opts.AllowHTTP, AllowedHosts: opts.AllowedHosts, Flags: vco.ManagerFlags})}
	}
	if opts.Prober == nil {
		opts.Prober = health.TLSProber{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := mgr.GetClient()
	addonVersion, repo := opts.Addons.Version, opts.Addons.ImageRepository
	if addonVersion == "" {
		addonVersion = version.Get().Version
	}
	if repo == "" {
		repo = addons.DefaultImageRepository
	}
	dnsDone := make(chan event.GenericEvent, 64)
	if opts.MachineResync <= 0 {
		opts.MachineResync = DefaultMachineResync
	}
	cp := &clusterProvider{
		client: c, reader: mgr.GetAPIReader(), platform: opts.Platform, prober: opts.Prober, dns: dns.NewWriter(opts.Clock),
		recorder: mgr.GetEventRecorderFor("vcocluster-controller"), clock: opts.Clock, dnsDone: dnsDone, resync: opts.MachineResync,
		addons: &addons.Delivery{Management: c, Registry: addons.Default, Connect: opts.Addons.Connect,
			Resync: opts.Addons.Resync, Poll: opts.Addons.Poll,
			Manager: addons.Settings{Version: addonVersion, ImageRepository: repo, Images: opts.Addons.Images,
				Platform: addons.Platform{AllowHTTP: opts.AllowHTTP, AllowedHosts: opts.AllowedHosts}}},
	}
	if err := (&capi.Reconciler[*capvcov1.VCOCluster, *clusterObserved]{
		Client: c, Role: capi.InfraCluster, Finalizer: capvcov1.VCOClusterFinalizer,
		New:             func() *capvcov1.VCOCluster { return &capvcov1.VCOCluster{} },
		NewList:         func() client.ObjectList { return &capvcov1.VCOClusterList{} },
		Provider:        cp,
		OwnedConditions: clusterConditions,
	}).SetupWithManager(ctx, mgr, capi.SetupOptions{
		WatchFilter: opts.WatchFilter, Concurrency: opts.ClusterConcurrency,
		Extra: func(b *builder.Builder) *builder.Builder {
			return b.
				Watches(&capvcov1.VCOMachine{}, handler.EnqueueRequestsFromMapFunc(machinesToCluster(c))).
				WatchesRawSource(source.Channel(dnsDone, &handler.EnqueueRequestForObject{}))
		},
	}); err != nil {
		return fmt.Errorf("VCOCluster controller: %w", err)
	}
	mp := &machineProvider{client: c, platform: opts.Platform, recorder: mgr.GetEventRecorderFor("vcomachine-controller"),
		clock: opts.Clock, resync: opts.MachineResync, listings: &vm.Listings{}}
	if err := (&capi.Reconciler[*capvcov1.VCOMachine, *machineObserved]{
		Client: c, Role: capi.InfraMachine, Finalizer: capvcov1.VCOMachineFinalizer,
		New:             func() *capvcov1.VCOMachine { return &capvcov1.VCOMachine{} },
		NewList:         func() client.ObjectList { return &capvcov1.VCOMachineList{} },
		Provider:        mp,
		OwnedConditions: machineConditions,
	}).SetupWithManager(ctx, mgr, capi.SetupOptions{
		WatchFilter: opts.WatchFilter, Concurrency: opts.MachineConcurrency,
		Extra: func(b *builder.Builder) *builder.Builder {
			return b.Watches(&capvcov1.VCOCluster{}, handler.EnqueueRequestsFromMapFunc(clusterToMachines(c)))
		},
	}); err != nil {
		return fmt.Errorf("VCOMachine controller: %w", err)
	}
	return (&templateReconciler{client: c}).setup(mgr)
}
