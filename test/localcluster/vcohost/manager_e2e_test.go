//go:build e2e

package vcohost_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	ccmconfig "github.com/capx-io/capx/internal/capvco/ccm/config"
	"github.com/capx-io/capx/internal/capvco/controllers"
	"github.com/capx-io/capx/internal/capvco/health"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/test/images"
	"github.com/capx-io/capx/test/localcluster"
	"github.com/capx-io/capx/test/localcluster/vcohost"
)

const (
	// mgrPlatform is this test's platform, apart from TestSimulatedVMsBecomeARealCluster's
	// (vcoh), so the two can run side by side.
	mgrPlatform   = "vcom"
	mgrCluster    = "wlm"
	mgrPrivateNet = "192.168.104.0/24"
	// addonRepo and the two versions: the manager's add-on images are
	// <repository>/<component>:<manager version>.
	addonRepo      = "capx.local"
	addonVersion   = "v0.0.0-e2e.1"
	upgradeVersion = "v0.0.0-e2e.2"
	ccmLabel       = "app.kubernetes.io/name=capvco-cloud-controller-manager"
	ccmComponent   = "capvco-cloud-controller-manager"
)

// TestManagerFormsARealCluster: CAPVCO's own controllers (controllers.Setup, as the manager
// runs them, in this process) and Cluster API's core manager (the real binary) on a management
// API server (envtest), for a Cluster, a VCOCluster, a control-plane Machine and a
// MachineDeployment of one worker, with prepared nodes' bootstrap data Secrets. The VCOCluster
// controller builds the cloudspace and the API server's load balancer in the simulator, the
// VCOMachine controller creates the VMs with the bootstrap data, they boot as real nodes and
// join through the load balancer once the controller found the control plane's API server
// answering and put it into the pool. The manager's add-on delivery installs the cloud
// controller manager through the workload kubeconfig Secret; its Pod runs on the control-plane
// node from the image this test built and tagged with the manager's version; every Node is
// initialised with the VCOMachine's provider ID; AddonsReady says what is installed at which
// version; Cluster API sets every Machine's nodeRef. The manager restarted at a new version
// rolls the same Deployment to the new image. Deleting the Cluster leaves nothing in the
// simulator and nothing on the machine.
func TestManagerFormsARealCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tarballs := buildVersionedCCMImages(t, ctx, root, addonVersion, upgradeVersion)
	t.Logf("CCM images %s and %s ready in %.0fs", addonVersion, upgradeVersion, time.Since(start).Seconds())
	formed := formManagedCluster(t, ctx, managedOptions{platform: mgrPlatform, private: mgrPrivateNet, cluster: mgrCluster, tarballs: tarballs})
	sim, p, m, env, cluster, vc, wl := formed.sim, formed.p, formed.m, formed.m.env, formed.cluster, formed.vc, formed.wl
	ns, vms, cpNode, prober := formed.m.ns, formed.vms, formed.cpNode, formed.prober
	pod := ccmPod(t, ctx, wl, addonRef(addonVersion))
	if pod.Spec.NodeName != cpNode {
		t.Fatalf("the CCM pod %s runs on %q, want the control-plane node %s", pod.Name, pod.Spec.NodeName, cpNode)
	}
	m.waitFor(vc, 3*time.Minute, "AddonsReady True at "+addonVersion, addonsReadyAt(vc, addonVersion))
	t.Logf("AddonsReady: %s", meta.FindStatusCondition(vc.Status.Conditions, capvcov1.AddonsReadyCondition).Message)

	// Cluster API: every Machine's nodeRef is the Node of its VCOMachine's provider ID.
	eventually(t, ctx, p, 3*time.Minute, "every Machine's nodeRef", func() error {
		var machines clusterv1.MachineList
		if err := env.Client.List(ctx, &machines, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(machines.Items) != 2 {
			return fmt.Errorf("%d Machines", len(machines.Items))
		}
		for _, mc := range machines.Items {
			i := slices.IndexFunc(vms, func(vm capvcov1.VCOMachine) bool { return vm.Name == mc.Spec.InfrastructureRef.Name })
			if i < 0 {
				return fmt.Errorf("machine %s: no VCOMachine %s", mc.Name, mc.Spec.InfrastructureRef.Name)
			}
			if mc.Spec.ProviderID != vms[i].Spec.ProviderID || mc.Status.NodeRef.Name != vms[i].Name {
				return fmt.Errorf("machine %s: providerID %q nodeRef %q, want %q and %q", mc.Name, mc.Spec.ProviderID,
					mc.Status.NodeRef.Name, vms[i].Spec.ProviderID, vms[i].Name)
			}
		}
		return nil
	})
	// The Cluster's availability gates: each but ControlPlaneAvailable holds. That one Cluster
	// API v1.14.2 computes only from a control-plane provider's object (controlPlaneRef): for
	// stand-alone control-plane Machines it reports Unknown, so Available cannot be True here.
	gates := []string{clusterv1.ClusterInfrastructureReadyCondition, clusterv1.ClusterControlPlaneInitializedCondition,
		clusterv1.ClusterRemoteConnectionProbeCondition, clusterv1.ClusterWorkersAvailableCondition}
	m.waitFor(cluster, 5*time.Minute, "the Cluster's gates but ControlPlaneAvailable True", func() error {
		for _, g := range gates {
			if c := meta.FindStatusCondition(cluster.Status.Conditions, g); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("%s is %v", g, c)
			}
		}
		avail := meta.FindStatusCondition(cluster.Status.Conditions, clusterv1.ClusterAvailableCondition)
		cpa := meta.FindStatusCondition(cluster.Status.Conditions, clusterv1.ClusterControlPlaneAvailableCondition)
		if avail == nil || cpa == nil || cpa.Status != metav1.ConditionUnknown || avail.Status == metav1.ConditionTrue ||
			!strings.Contains(avail.Message, clusterv1.ClusterControlPlaneAvailableCondition) {
			return fmt.Errorf("Available %v, ControlPlaneAvailable %v", avail, cpa)
		}
		return nil
	})
	t.Logf("Cluster: %s", describeConditions(cluster.Status.Conditions))

	// The manager at a new version: the same Deployment rolls to the new version's image.
	dep, err := wl.AppsV1().Deployments("kube-system").Get(ctx, ccmDeployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.stopCAPVCO()
	m.startCAPVCO(prober, upgradeVersion)
	start = time.Now()
	m.waitFor(vc, 5*time.Minute, "AddonsReady True at "+upgradeVersion, addonsReadyAt(vc, upgradeVersion))
	rolled, err := wl.AppsV1().Deployments("kube-system").Get(ctx, ccmDeployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rolled.UID != dep.UID || rolled.Spec.Template.Spec.Containers[0].Image != addonRef(upgradeVersion) || rolled.Generation <= dep.Generation {
		t.Fatalf("the CCM Deployment after the upgrade: uid %s (was %s), image %s, generation %d (was %d)", rolled.UID, dep.UID,
			rolled.Spec.Template.Spec.Containers[0].Image, rolled.Generation, dep.Generation)
	}
	newPod := ccmPod(t, ctx, wl, addonRef(upgradeVersion))
	t.Logf("the CCM rolled to %s in %.0fs (pod %s replaced by %s)", upgradeVersion, time.Since(start).Seconds(), pod.Name, newPod.Name)

	// Deleting the Cluster: Cluster API deletes the Machines, CAPVCO their VMs, then the
	// cloudspace; nothing stays billed and every machine powers off for good.
	if err := env.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	m.waitGone(cluster, 6*time.Minute)
	t.Logf("the Cluster was deleted in %.0fs", time.Since(start).Seconds())
	if billed := sim.Billed(); len(billed) > 0 {
		t.Errorf("billed on the platform after the cluster's deletion: %+v", billed)
	}
	if fronts := sim.TCPLoadBalancerFronts(); len(fronts) > 0 {
		t.Errorf("load balancers still listen on %v", fronts)
	}
	eventually(t, ctx, p, 2*time.Minute, "every machine destroyed", func() error {
		for _, s := range p.Machines() {
			if s.State != localcluster.MachineDestroyed {
				return fmt.Errorf("machine %d is %s", s.ID, s.State)
			}
		}
		return nil
	})
}

// managedOptions are what differs between the tests of a Cluster the manager forms.
type managedOptions struct {
	// platform and private name the platform network and its cloudspace prefix: one of its own
	// per test, so tests run side by side.
	platform, private string
	// cluster names the Cluster and its VCOCluster.
	cluster string
	// tarballs are imported on every machine (the add-on images).
	tarballs []string
	// images override add-on components' images (the manager's --capvco-addon-image).
	images map[string]string
	// resync is how often an available add-on is checked again (0: the manager's default).
	resync time.Duration
	// vcoCluster changes the VCOCluster before it is created (the add-ons it selects).
	vcoCluster func(*capvcov1.VCOCluster)
}

// managedCluster is a Cluster formed of real nodes by the CAPVCO controllers and Cluster API's
// core manager, every Node initialised by the CCM the manager delivered.
type managedCluster struct {
	sim     *vcosim.Sim
	p       *localcluster.Platform
	m       *mgmt
	prober  health.Prober
	cluster *clusterv1.Cluster
	vc      *capvcov1.VCOCluster
	wl      kubernetes.Interface
	vms     []capvcov1.VCOMachine
	cpNode  string
}

// formManagedCluster brings up a simulated platform and a management API server with Cluster
// API's core manager and the CAPVCO controllers at addonVersion, and makes a Cluster of one
// control-plane Machine and a MachineDeployment of one worker, with prepared nodes' bootstrap
// data Secrets. It returns once every VCOMachine's Node is initialised by the delivered CCM.
func formManagedCluster(t *testing.T, ctx context.Context, o managedOptions) *managedCluster {
	t.Helper()
	sim, p, srv := upSimulatedPlatform(t, ctx, o.platform, o.private, o.tarballs...)
	// The simulator's API is served inside the platform for the CCM, and on the host's loopback
	// for the manager, which runs here as it would in a management cluster with a route to the
	// platform.
	onHost, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(onHost) }()
	jwt, err := sim.Token(vcosim.SeedClusterPrinc, 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	hostURL := "http://" + onHost.Addr().String() + "/api/1"
	t.Cleanup(func() { deleteSimulatedClusters(t, sim, hostURL, jwt) }) // after a failure

	// The workload API server as the host reaches it: a loopback port carried to the load
	// balancer's front end inside the platform (known once the VCOCluster has its endpoint).
	apiFwd := forwardIntoPlatform(t, p)

	env, err := testenv.Start(testenv.Options{CAPI: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Cluster API core manager log (end):\n%s", lastBytes(env.CAPILog(), 4000))
		}
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	ns := env.NewNamespace(t)
	m := &mgmt{t: t, env: env, ns: ns, images: o.images, resync: o.resync}
	m.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vco-credentials"}, Data: map[string][]byte{
		vco.SecretKeyURL: []byte(hostURL), vco.SecretKeyCustomer: []byte(vcosim.SeedCustomer), vco.SecretKeyJWT: []byte(jwt)}})
	// The CCM's own credential (spec.addons.cloudControllerManager.credentialsSecretRef): the
	// same principal, at the address the workload cluster reaches the platform on.
	m.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ccm-credentials"}, Data: map[string][]byte{
		vco.SecretKeyURL: []byte("http://" + apiAddr + "/api/1"), vco.SecretKeyCustomer: []byte(vcosim.SeedCustomer), vco.SecretKeyJWT: []byte(jwt)}})
	prober := health.TLSProber{Timeout: 3 * time.Second, Dial: p.DialContext}
	m.startCAPVCO(prober, addonVersion)

	// The Cluster and its VCOCluster; the kubeconfig Secret is written before the Cluster has
	// an endpoint, as a control-plane provider's would be (Cluster API writes one of its own,
	// at the endpoint the host cannot reach, only where none exists).
	secrets, err := localcluster.NewClusterSecrets(o.cluster)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := secrets.AdminKubeconfig(o.cluster, "https://"+apiFwd.addr, "capi")
	if err != nil {
		t.Fatal(err)
	}
	m.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: o.cluster + "-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: o.cluster}},
		Type:       clusterv1.ClusterSecretType, Data: map[string][]byte{"value": kc},
	})
	cluster := testenv.Cluster(ns, o.cluster, "VCOCluster", o.cluster)
	cluster.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/16"}
	cluster.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{"10.244.0.0/16"}
	vc := testenv.VCOCluster(ns, o.cluster, o.cluster, vcosim.SeedLocation, "vco-credentials")
	vc.Spec.Cloudspace.PrivateNetwork = o.private
	vc.Spec.ControlPlaneLoadBalancer.HealthCheckIntervalSeconds = 5
	vc.Spec.Addons.CloudControllerManager.CredentialsSecretRef = &corev1.LocalObjectReference{Name: "ccm-credentials"}
	if o.vcoCluster != nil {
		o.vcoCluster(vc)
	}
	m.create(cluster)
	m.create(vc)
	m.waitFor(vc, 3*time.Minute, "the VCOCluster provisioned", func() error {
		if !ptr.Deref(vc.Status.Initialization.Provisioned, false) || vc.Spec.ControlPlaneEndpoint.Host == "" {
			return errors.New("not provisioned")
		}
		return nil
	})
	endpoint := net.JoinHostPort(vc.Spec.ControlPlaneEndpoint.Host, fmt.Sprint(vc.Spec.ControlPlaneEndpoint.Port))
	apiFwd.to.Store(&endpoint)
	csID := vc.Status.Cloudspaces[0].ID
	site := ccmconfig.Site{Name: vc.Status.Cloudspaces[0].Site, Location: vc.Spec.Location}
	t.Logf("VCOCluster provisioned: cloudspace %s, API endpoint %s", csID, endpoint)

	// The bootstrap data Secrets: prepared nodes, at the endpoint CAPVCO made.
	bootstrap := func(name, role string) string {
		ud, err := secrets.Bootstrap(role, o.cluster, endpoint, "10.96.0.0/16", "10.244.0.0/16").UserData()
		if err != nil {
			t.Fatal(err)
		}
		m.create(testenv.BootstrapSecret(ns, name, o.cluster, string(ud)))
		return name
	}
	img := imageID(t, sim)
	deletion := clusterv1.MachineDeletionSpec{NodeDrainTimeoutSeconds: ptr.To[int32](30),
		NodeVolumeDetachTimeoutSeconds: ptr.To[int32](30), NodeDeletionTimeoutSeconds: ptr.To[int32](10)}
	machineSpec := capvcov1.VCOMachineSpec{Image: capvcov1.ImageSpec{ID: ptr.To(img)}, VCPUs: vmVCPUs, MemoryMiB: vmMemoryMiB, BootDiskGiB: 20}
	start := time.Now()
	cpMachine := testenv.Machine(ns, o.cluster+"-cp-0", o.cluster, "VCOMachine", o.cluster+"-cp-0", bootstrap(o.cluster+"-cp-bootstrap", localcluster.RoleControlPlane))
	cpMachine.Labels[clusterv1.MachineControlPlaneLabel] = ""
	cpMachine.Spec.Version = "v1.36.3"
	cpMachine.Spec.Deletion = deletion
	cpVM := testenv.VCOMachine(ns, cpMachine.Name, o.cluster, img)
	cpVM.Labels[clusterv1.MachineControlPlaneLabel] = ""
	cpVM.Spec = machineSpec
	m.create(cpMachine)
	m.create(cpVM)
	workerTemplate := &capvcov1.VCOMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: o.cluster + "-md",
		Labels: map[string]string{clusterv1.ClusterNameLabel: o.cluster}},
		Spec: capvcov1.VCOMachineTemplateSpec{Template: capvcov1.VCOMachineTemplateResource{Spec: machineSpec}}}
	m.create(workerTemplate)
	mdLabels := map[string]string{clusterv1.ClusterNameLabel: o.cluster, clusterv1.MachineDeploymentNameLabel: o.cluster + "-md"}
	m.create(&clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: o.cluster + "-md", Labels: map[string]string{clusterv1.ClusterNameLabel: o.cluster}},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: o.cluster, Replicas: ptr.To[int32](1),
			Selector: metav1.LabelSelector{MatchLabels: mdLabels},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: mdLabels},
				Spec: clusterv1.MachineSpec{
					ClusterName: o.cluster, Version: "v1.36.3", Deletion: deletion,
					Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrap(o.cluster+"-md-bootstrap", localcluster.RoleWorker))},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: capvcov1.GroupVersion.Group, Kind: "VCOMachineTemplate", Name: workerTemplate.Name},
				},
			},
		},
	})

	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 15 * time.Second
	wl := kubernetes.NewForConfigOrDie(cfg)

	// Every VCOMachine's Node, initialised by the CCM the manager delivered.
	var vms []capvcov1.VCOMachine
	var cpNode string
	eventually(t, ctx, p, 10*time.Minute, "every VCOMachine's Node initialised by the delivered CCM", func() error {
		if err := ccmCrashed(ctx, wl, machineDirOf(p, cpVM), time.Time{}); err != nil {
			return stop{err}
		}
		var list capvcov1.VCOMachineList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 2 {
			return fmt.Errorf("%d VCOMachines", len(list.Items))
		}
		nodes, err := wl.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, vm := range list.Items {
			if vm.Spec.ProviderID == "" {
				return fmt.Errorf("VCOMachine %s has no provider ID yet", vm.Name)
			}
			i := slices.IndexFunc(nodes.Items, func(n corev1.Node) bool { return n.Name == vm.Name })
			if i < 0 {
				return fmt.Errorf("no Node %s yet (%d Nodes)", vm.Name, len(nodes.Items))
			}
			if err := initialised(&nodes.Items[i], vm.Spec.ProviderID, internalIP(&vm), site); err != nil {
				return fmt.Errorf("node %s: %w", vm.Name, err)
			}
			if _, ok := vm.Labels[clusterv1.MachineControlPlaneLabel]; ok {
				cpNode = vm.Name
			}
		}
		vms = list.Items
		return nil
	})
	t.Logf("every Node initialised %.0fs after the Machines were created", time.Since(start).Seconds())
	return &managedCluster{sim: sim, p: p, m: m, prober: prober, cluster: cluster, vc: vc, wl: wl, vms: vms, cpNode: cpNode}
}

// mgmt is the management side: the API server, the test's namespace and the CAPVCO
// controllers, which a test stops and starts again (an upgraded manager).
type mgmt struct {
	t   *testing.T
	env *testenv.Env
	ns  string
	// images and resync are the add-on delivery's --capvco-addon-image overrides and resync.
	images map[string]string
	resync time.Duration
	capvco *mgrtest.CAPVCO // the controllers running now
}

// startCAPVCO runs the CAPVCO controllers as the manager sets them up, at the given add-on
// version, with the platform's API on the host, the prober reaching the control-plane VMs
// inside the platform, and the add-on images of addonRepo (but those m.images overrides).
func (m *mgmt) startCAPVCO(prober health.Prober, version string) {
	m.t.Helper()
	m.capvco = mgrtest.StartCAPVCO(m.t, m.env, mgrtest.CAPVCOOptions{Verbosity: 1, Controllers: controllers.Options{
		AllowHTTP: true, Prober: prober,
		Addons: controllers.AddonOptions{Version: version, ImageRepository: addonRepo, Images: m.images, Resync: m.resync, Poll: 3 * time.Second}}})
}

func (m *mgmt) stopCAPVCO() { m.capvco.Stop() }

// create creates o, retrying while Cluster API's webhooks are not serving yet.
func (m *mgmt) create(o client.Object) {
	m.t.Helper()
	mgrtest.Create(m.t, m.env, o)
}

// waitFor polls o until ok passes; on timeout it fails with o's conditions.
func (m *mgmt) waitFor(o interface {
	client.Object
	GetConditions() []metav1.Condition
}, timeout time.Duration, what string, ok func() error) {
	m.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := m.env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o)
		if err == nil {
			err = ok()
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("%s: not after %s: %v; %T %s conditions: %s", what, timeout, err, o, o.GetName(), describeConditions(o.GetConditions()))
		}
		time.Sleep(time.Second)
	}
}

func (m *mgmt) waitGone(o client.Object, timeout time.Duration) {
	m.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := m.env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o)
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("%T %s still there after %s (%v)", o, o.GetName(), timeout, err)
			if c, ok := o.(interface{ GetConditions() []metav1.Condition }); ok {
				msg += ": " + describeConditions(c.GetConditions())
			}
			var vms capvcov1.VCOMachineList
			if m.env.Client.List(context.Background(), &vms, client.InNamespace(m.ns)) == nil {
				for _, vm := range vms.Items {
					msg += fmt.Sprintf("\nVCOMachine %s: %s", vm.Name, describeConditions(vm.Status.Conditions))
				}
			}
			m.t.Fatal(msg)
		}
		time.Sleep(time.Second)
	}
}

// addonsReadyAt checks that the VCOCluster's AddonsReady says the CCM is installed and
// available at version, and that status.addons records it so.
func addonsReadyAt(vc *capvcov1.VCOCluster, version string) func() error {
	return func() error {
		c := meta.FindStatusCondition(vc.Status.Conditions, capvcov1.AddonsReadyCondition)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "installed and available: cloud-controller-manager "+version) {
			return fmt.Errorf("AddonsReady %v", c)
		}
		i := slices.IndexFunc(vc.Status.Addons, func(a capvcov1.AddonStatus) bool { return a.Name == "cloud-controller-manager" })
		if i < 0 || vc.Status.Addons[i].Version != version || !vc.Status.Addons[i].Available {
			return fmt.Errorf("status.addons %+v", vc.Status.Addons)
		}
		return nil
	}
}

func describeConditions(cs []metav1.Condition) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "\n  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// addonRef is the CCM image the manager at version names.
func addonRef(version string) string { return addonImage(ccmComponent, version) }

// addonImage is the image of one of the project's add-on components the manager at version
// names.
func addonImage(component, version string) string {
	return addonRepo + "/" + component + ":" + version
}

// ccmPod is the one CCM Pod not being deleted, Ready, running image.
func ccmPod(t *testing.T, ctx context.Context, wl kubernetes.Interface, image string) corev1.Pod {
	t.Helper()
	var pods *corev1.PodList
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var err error
		pods, err = wl.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: ccmLabel})
		if err == nil {
			pods.Items = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
			if len(pods.Items) == 1 && pods.Items[0].Spec.Containers[0].Image == image && podReady(&pods.Items[0]) {
				return pods.Items[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the CCM pod, Ready with image %s: %v (%v)", image, podSummary(pods), err)
		}
		time.Sleep(2 * time.Second)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func internalIP(vm *capvcov1.VCOMachine) string {
	for _, a := range vm.Status.Addresses {
		if a.Type == clusterv1.MachineInternalIP {
			return a.Address
		}
	}
	return ""
}

// machineDirOf is the folder of the platform machine a VCOMachine's VM runs on ("" before it
// has one), for the CCM's logs.
func machineDirOf(p *localcluster.Platform, vm *capvcov1.VCOMachine) string {
	for _, s := range p.Machines() {
		if s.Hostname == vm.Name {
			return s.Dir
		}
	}
	return ""
}

func imageID(t *testing.T, sim *vcosim.Sim) int64 {
	t.Helper()
	for _, img := range sim.Snapshot().Images {
		if img.Location == vcosim.SeedLocation && img.Name == vcosim.SeedImageName {
			return int64(img.ID)
		}
	}
	t.Fatalf("no seeded image in %s", vcosim.SeedLocation)
	return 0
}

// deleteSimulatedClusters deletes every cloudspace still live in the simulator, with its VMs
// (and so their machines), after a failed run.
func deleteSimulatedClusters(t *testing.T, sim *vcosim.Sim, url, jwt string) {
	vc, err := vco.New(vco.Credentials{URL: url, Customer: vcosim.SeedCustomer, JWT: jwt}, vco.Options{MaxAttempts: 1})
	if err != nil {
		t.Error(err)
		return
	}
	for _, cs := range sim.Snapshot().Cloudspaces {
		if cs.Status != "DESTROYED" {
			_ = vcohost.DeleteCluster(context.Background(), vc, cs.ID)
		}
	}
}

// loopbackForward carries connections to a host loopback port on to an address inside the
// platform, once one is set.
type loopbackForward struct {
	addr string
	to   atomic.Pointer[string]
}

func forwardIntoPlatform(t *testing.T, p *localcluster.Platform) *loopbackForward {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	f := &loopbackForward{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				to := f.to.Load()
				if to == nil {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				up, err := p.DialContext(ctx, "tcp", *to)
				cancel()
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); _ = up.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return f
}

// buildVersionedCCMImages builds the CCM once and writes one image tarball per version, tagged
// as the manager at that version names it.
func buildVersionedCCMImages(t *testing.T, ctx context.Context, root string, versions ...string) []string {
	t.Helper()
	spec := ccmImageSpec(t, ctx, root, filepath.Join(managerAddonsDir(root), "bin", ccmComponent))
	return writeVersionedImages(t, managerAddonsDir(root), ccmComponent, spec, versions...)
}

// managerAddonsDir keeps the add-on images the manager's tests build.
func managerAddonsDir(root string) string {
	return filepath.Join(root, "_artifacts", "images-platform", "manager-addons")
}

// writeVersionedImages writes one image tarball of spec per version into dir, tagged
// <addonRepo>/<component>:<version> as the manager at that version names it; a tarball of the
// same content and tag is kept from an earlier run.
func writeVersionedImages(t *testing.T, dir, component string, spec images.Spec, versions ...string) []string {
	t.Helper()
	key, err := images.Key(spec)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range versions {
		tarball := filepath.Join(dir, component+"-"+v+"-"+key[:images.TagLen]+".tar")
		out = append(out, tarball)
		if _, err := os.Stat(tarball); err == nil {
			continue
		}
		old, _ := filepath.Glob(filepath.Join(dir, component+"-"+v+"-*.tar"))
		for _, f := range old {
			_ = os.Remove(f)
		}
		spec.Ref = addonImage(component, v)
		if err := images.WriteTarball(spec, tarball); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
