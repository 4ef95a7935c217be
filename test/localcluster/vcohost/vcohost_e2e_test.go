//go:build e2e

package vcohost_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/capvco/ccm/config"
	"github.com/capx-io/capx/internal/capvco/ccm/manifests"
	"github.com/capx-io/capx/internal/capvco/ccm/servicelb"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/manifest"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/test/images"
	"github.com/capx-io/capx/test/localcluster"
	"github.com/capx-io/capx/test/localcluster/vcohost"
)

const (
	platformName = "vcoh"
	// apiAddr is where the simulator's API listens inside the platform's router: an address
	// of a public prefix of the platform's own, apart from the location's external network.
	apiAddr       = "192.0.2.10:80"
	namespace     = "default"
	clusterName   = "wl"
	uninitTaint   = "node.cloudprovider.kubernetes.io/uninitialized"
	shutdownTaint = "node.cloudprovider.kubernetes.io/shutdown"
	ccmRepo       = "capx.local/capvco-cloud-controller-manager"
	ccmDeployment = "capvco-cloud-controller-manager"
	ccmPackage    = "github.com/capx-io/capx/cmd/capvco-cloud-controller-manager"
	vmVCPUs       = 2
	vmMemoryMiB   = 2048
	instanceType  = "2vcpu-2048mib"
)

// TestSimulatedVMsBecomeARealCluster: the simulator's VMs, created through the whitesky.cloud
// API with a prepared node's bootstrap data, boot as real nodes on a platform network; their
// kubelets join through the simulator's TCP load balancer (the router carries it to the pool's
// members); capvco-cloud-controller-manager, delivered with its own manifests
// (internal/capvco/ccm/manifests) and run as a Pod of the workload cluster from an image built
// here, initialises every Node from the simulator (provider ID, addresses, instance type,
// region and zone, the uninitialised taint gone); a Service of type LoadBalancer gets a
// platform load balancer whose pool follows the worker's health; a VM halted in the simulator
// gets its Node tainted shut down, untainted once started again; a VM deleted in the
// simulator removes its Node; and deleting the cloudspace leaves nothing, on the platform or on
// the machine.
func TestSimulatedVMsBecomeARealCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ccm := buildCCMImage(t, ctx, root)
	t.Logf("CCM image %s built in %.0fs", ccm.Ref, time.Since(start).Seconds())
	sim, p, _ := upSimulatedPlatform(t, ctx, platformName, "192.168.103.0/24", ccm.Tarball)

	jwt, err := sim.Token(vcosim.SeedClusterPrinc, 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	creds := vco.Credentials{URL: "http://" + apiAddr + "/api/1", Customer: vcosim.SeedCustomer, JWT: jwt}
	vc, err := vco.New(creds, vco.Options{AllowHTTP: true, MaxAttempts: 1,
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: p.DialContext}}})
	if err != nil {
		t.Fatal(err)
	}

	// What CAPVCO builds for a cluster: its cloudspace, the API server's pool and load
	// balancer, the VMs with their bootstrap data, the control plane admitted to the pool.
	site := config.Site{Name: "primary", Location: vcosim.SeedLocation}
	csID, err := vc.CreateCloudspace(ctx, vco.CreateCloudspaceRequest{Name: names.Cloudspace(namespace, clusterName, site.Name),
		Location: site.Location, PrivateNetwork: "192.168.103.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	// After a failure: what the platform still holds goes, and with its VMs their machines.
	t.Cleanup(func() { _ = vcohost.DeleteCluster(context.Background(), vc, csID) })
	cs, err := vc.GetCloudspace(ctx, csID)
	if err != nil {
		t.Fatal(err)
	}
	front := cs.ExternalNetworkIP
	poolID, err := vc.CreateServerPool(ctx, csID, names.APIServer(namespace, clusterName), "API server")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vc.CreateLoadBalancer(ctx, csID, vco.LoadBalancerSpec{Name: names.APIServer(namespace, clusterName), Type: "TCP",
		FrontEnd: vco.LBFrontEnd{Port: 6443, IPAddress: front}, BackEnd: vco.LBBackEnd{ServerPoolID: poolID, TargetPort: 6443}}); err != nil {
		t.Fatal(err)
	}
	endpoint := front + ":6443"
	secrets, err := localcluster.NewClusterSecrets(clusterName)
	if err != nil {
		t.Fatal(err)
	}
	img, err := vc.FindImage(ctx, site.Location, vcosim.SeedImageName)
	if err != nil {
		t.Fatal(err)
	}
	createVM := func(name, role string) (int, string) {
		t.Helper()
		ud, err := secrets.Bootstrap(role, clusterName, endpoint, "10.96.0.0/16", "10.244.0.0/16").UserData()
		if err != nil {
			t.Fatal(err)
		}
		id, err := vc.CreateVM(ctx, csID, vco.CreateVMRequest{Name: name, Hostname: name, VCPUs: vmVCPUs, MemoryMiB: vmMemoryMiB,
			ImageID: img.ID, UserData: string(ud)})
		if err != nil {
			t.Fatalf("creating VM %s: %v", name, err)
		}
		vm, err := vc.GetVM(ctx, csID, id)
		if err != nil || len(vm.NICs) == 0 {
			t.Fatalf("VM %s: %+v, %v", name, vm, err)
		}
		return id, vm.NICs[0].IP
	}
	start = time.Now()
	cpID, cpIP := createVM("wl-cp-0", localcluster.RoleControlPlane)
	if _, err := vc.AddPoolHost(ctx, csID, poolID, cpIP); err != nil {
		t.Fatal(err)
	}
	workerID, workerIP := createVM("wl-md-0", localcluster.RoleWorker)
	t.Logf("VMs %d (%s) and %d (%s) created; the API load balancer listens on %s", cpID, cpIP, workerID, workerIP, endpoint)

	kc, err := secrets.AdminKubeconfig(clusterName, "https://"+endpoint, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dial = p.DialContext
	cfg.Timeout = 15 * time.Second
	wl := kubernetes.NewForConfigOrDie(cfg)

	eventually(t, ctx, p, 12*time.Minute, "both kubelets registered through the load balancer", func() error {
		nodes, err := wl.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var got []string
		for _, n := range nodes.Items {
			got = append(got, n.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, []string{"wl-cp-0", "wl-md-0"}) {
			return fmt.Errorf("nodes %v", got)
		}
		return nil
	})
	t.Logf("both Nodes registered %.0fs after the VMs were created", time.Since(start).Seconds())

	start = time.Now()
	deliverCCM(t, ctx, cfg, wl, creds, ccm.Ref, site)
	want := map[string]struct {
		id int
		ip string
	}{"wl-cp-0": {cpID, cpIP}, "wl-md-0": {workerID, workerIP}}
	// The CCM runs as uid 65532 and reads its credential from a Secret volume, which only
	// fsGroup makes readable on a real node; a crash for any reason ends the test.
	eventually(t, ctx, p, 6*time.Minute, "every Node initialised by the CCM", func() error {
		cp, _ := p.MachineStatus(cpID)
		if err := ccmCrashed(ctx, wl, cp.Dir, time.Time{}); err != nil {
			return stop{err}
		}
		for name, vm := range want {
			n, err := wl.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := initialised(n, names.ProviderID(site.Location, vm.id), vm.ip, site); err != nil {
				return fmt.Errorf("node %s: %w", name, err)
			}
		}
		return nil
	})
	pods, err := wl.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=capvco-cloud-controller-manager"})
	if err == nil {
		pods.Items = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	}
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != "wl-cp-0" || pods.Items[0].Spec.Containers[0].Image != ccm.Ref {
		t.Fatalf("the CCM pod: %v (%v)", podSummary(pods), err)
	}
	t.Logf("every Node initialised %.0fs after the CCM was delivered ; CCM pod %s on %s", time.Since(start).Seconds(), pods.Items[0].Name, pods.Items[0].Spec.NodeName)

	// A Service load balancer: its pool holds the worker only (the control plane is excluded
	// from external load balancers), and follows the worker's health.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: corev1.ServiceSpec{
		Type:                  corev1.ServiceTypeLoadBalancer,
		ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
		Ports:                 []corev1.ServicePort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}},
	}}
	if _, err := wl.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svcPool := servicelb.PoolName(namespace, clusterName, svc)
	members := func() ([]string, error) {
		for _, pl := range sim.Snapshot().ServerPools {
			if pl.CloudspaceID == csID && pl.Name == svcPool {
				var out []string
				for _, h := range pl.Hosts {
					out = append(out, h.Address)
				}
				slices.Sort(out)
				return out, nil
			}
		}
		return nil, fmt.Errorf("no pool %s in the simulator", svcPool)
	}
	wantMembers := func(want ...string) func() error {
		return func() error {
			got, err := members()
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				return fmt.Errorf("pool %s holds %v, want %v", svcPool, got, want)
			}
			return nil
		}
	}
	eventually(t, ctx, p, 3*time.Minute, "the Service's load balancer, with the worker in its pool", func() error {
		s, err := wl.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ing := s.Status.LoadBalancer.Ingress; len(ing) != 1 || ing[0].IP != front {
			return fmt.Errorf("ingress %+v, want %s", ing, front)
		}
		return wantMembers(workerIP)()
	})
	if err := p.StopKubelet(workerID); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	eventually(t, ctx, p, 3*time.Minute, "the stopped worker out of the pool", wantMembers())
	t.Logf("the worker left the pool %.0fs after its kubelet stopped", time.Since(start).Seconds())
	if err := p.StartKubelet(workerID); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, p, 3*time.Minute, "the worker back in the pool", wantMembers(workerIP))
	if err := wl.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, p, 3*time.Minute, "the Service's pool and load balancer deleted with it", func() error {
		snap := sim.Snapshot()
		for _, pl := range snap.ServerPools {
			if pl.Name == svcPool {
				return fmt.Errorf("pool %s still there", svcPool)
			}
		}
		for _, lb := range snap.LoadBalancers {
			if servicelb.Owned(svcPool, lb.Name) {
				return fmt.Errorf("load balancer %s still there", lb.Name)
			}
		}
		return nil
	})

	// A VM halted on the platform: its machine powers off, its Node goes NotReady and the CCM
	// taints it shut down; started again, the machine boots from its disk and the Node is
	// Ready without the taint.
	if err := vc.StopVM(ctx, csID, workerID, false); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	eventually(t, ctx, p, 3*time.Minute, "the halted VM's Node tainted shut down", func() error {
		n, err := wl.CoreV1().Nodes().Get(ctx, "wl-md-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == shutdownTaint }) {
			return fmt.Errorf("taints %v", n.Spec.Taints)
		}
		return nil
	})
	t.Logf("the halted VM's Node was tainted %.0fs after the stop", time.Since(start).Seconds())
	if err := vc.StartVM(ctx, csID, workerID); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, p, 4*time.Minute, "the restarted VM's Node Ready, the shutdown taint gone", func() error {
		n, err := wl.CoreV1().Nodes().Get(ctx, "wl-md-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == shutdownTaint }) || !ready(n) {
			return fmt.Errorf("taints %v, conditions %v", n.Spec.Taints, n.Status.Conditions)
		}
		return nil
	})

	// A VM deleted on the platform: its machine powers off, its Node goes NotReady and the
	// CCM's lifecycle controller deletes it once the platform says the VM is gone.
	if err := vc.DeleteVM(ctx, csID, workerID, vco.DeleteVMOptions{Permanently: true}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	eventually(t, ctx, p, 5*time.Minute, "the deleted VM's Node removed", func() error {
		_, err := wl.CoreV1().Nodes().Get(ctx, "wl-md-0", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
	t.Logf("the deleted VM's Node was removed %.0fs after the delete", time.Since(start).Seconds())
	if s, _ := p.MachineStatus(workerID); s.State != localcluster.MachineDestroyed {
		t.Errorf("the deleted VM's machine: %+v", s)
	}

	// Deleting the cluster as CAPVCO does (its VMs permanently, then the cloudspace) leaves
	// nothing billed on the platform, and the control plane's machine powers off for good.
	if err := vcohost.DeleteCluster(ctx, vc, csID); err != nil {
		t.Fatal(err)
	}
	if billed := sim.Billed(); len(billed) > 0 {
		t.Errorf("billed on the platform after the cluster's deletion: %+v", billed)
	}
	if fronts := sim.TCPLoadBalancerFronts(); len(fronts) > 0 {
		t.Errorf("load balancers still listen on %v", fronts)
	}
	eventually(t, ctx, p, 2*time.Minute, "the control plane's machine destroyed", func() error {
		if s, _ := p.MachineStatus(cpID); s.State != localcluster.MachineDestroyed {
			return fmt.Errorf("machine %d is %s", cpID, s.State)
		}
		return nil
	})
}

// stop is an error after which waiting longer is pointless.
type stop struct{ err error }

func (s stop) Error() string { return s.err.Error() }

// ccmCrashed reports a CCM container that exited, with the end of its log.
func ccmCrashed(ctx context.Context, wl kubernetes.Interface, machineDir string, since time.Time) error {
	pods, err := wl.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=capvco-cloud-controller-manager"})
	if err != nil {
		return nil
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.CreationTimestamp.Time.Before(since.Truncate(time.Second)) {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount == 0 || cs.LastTerminationState.Terminated == nil {
				continue
			}
			return fmt.Errorf("the CCM container of %s exited (%s, code %d), restarted %d times; its log on the node:\n%s", p.Name,
				cs.LastTerminationState.Terminated.Reason, cs.LastTerminationState.Terminated.ExitCode, cs.RestartCount, podLogs(machineDir, p))
		}
	}
	return nil
}

// podLogs reads the end of every log file the kubelet of the machine in dir keeps for the pod.
func podLogs(dir string, p corev1.Pod) string {
	files, _ := filepath.Glob(filepath.Join(dir, "pod-logs", p.Namespace+"_"+p.Name+"_*", "*", "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		fmt.Fprintf(&b, "==> %s\n%s\n", f, data)
	}
	return b.String()
}

// deliverCCM does what the add-on delivery does: the credential Secret in kube-system, then the
// CCM's own manifests, with one replica (there is one control-plane node).
func deliverCCM(t *testing.T, ctx context.Context, cfg *rest.Config, wl kubernetes.Interface, creds vco.Credentials, image string, site config.Site) {
	t.Helper()
	const secret = "capvco-credentials"
	_, err := wl.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: "kube-system"},
		StringData: map[string]string{vco.SecretKeyURL: creds.URL, vco.SecretKeyCustomer: creds.Customer, vco.SecretKeyJWT: creds.JWT},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := manifests.Render(manifests.Options{Image: image, CredentialsSecret: secret, Replicas: 1,
		Cluster: config.Cluster{Namespace: namespace, Name: clusterName}, Sites: []config.Site{site},
		LoadBalancer: config.LoadBalancer{HealthCheckIntervalSeconds: 2},
		Platform:     config.Platform{AllowHTTP: true}})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Objects(stream)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// initialised checks what the CCM sets on a Node.
func initialised(n *corev1.Node, providerID, ip string, site config.Site) error {
	if n.Spec.ProviderID != providerID {
		return fmt.Errorf("providerID %q, want %q", n.Spec.ProviderID, providerID)
	}
	if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == uninitTaint }) {
		return errors.New("still tainted uninitialised")
	}
	for k, v := range map[string]string{corev1.LabelTopologyRegion: site.Location, corev1.LabelTopologyZone: site.Name, corev1.LabelInstanceTypeStable: instanceType} {
		if n.Labels[k] != v {
			return fmt.Errorf("label %s=%q, want %q", k, n.Labels[k], v)
		}
	}
	if !slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeInternalIP && a.Address == ip }) {
		return fmt.Errorf("addresses %v, want InternalIP %s", n.Status.Addresses, ip)
	}
	return nil
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podSummary(pods *corev1.PodList) []string {
	if pods == nil {
		return nil
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, fmt.Sprintf("%s on %q %s", p.Name, p.Spec.NodeName, p.Status.Phase))
	}
	return out
}

// eventually polls check until it passes, failing the test at the timeout, or at once when a
// machine failed to boot.
func eventually(t *testing.T, ctx context.Context, p *localcluster.Platform, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		var fatal stop
		if errors.As(err, &fatal) {
			t.Fatalf("%s: %v", what, fatal.err)
		}
		for _, m := range p.Machines() {
			if m.State == localcluster.MachineFailed {
				t.Fatalf("%s: machine %d failed: %v (logs: %s/logs)", what, m.ID, m.Err, m.Dir)
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not after %s: %v", what, timeout, err)
		}
		time.Sleep(2 * time.Second)
	}
}

// upSimulatedPlatform brings up a platform network of the given name and private prefix whose
// machines and load balancers are the simulator's (vcohost), with the image tarballs imported
// on every machine, and serves the simulator's API inside it at apiAddr. The platform goes down
// at the end of the test, and the test fails if it left anything on the machine. srv serves
// the API; a test may serve it on more listeners.
func upSimulatedPlatform(t *testing.T, ctx context.Context, name, private string, tarballs ...string) (*vcosim.Sim, *localcluster.Platform, *http.Server) {
	t.Helper()
	if err := localcluster.DownPlatform(ctx, localcluster.PlatformOptions{Name: name}); err != nil {
		t.Fatalf("an earlier run's platform: %v", err)
	}
	sim, err := vcosim.New(vcosim.Options{TimeScale: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	p, err := localcluster.UpPlatform(ctx, localcluster.PlatformOptions{
		Name:          name,
		Public:        []string{"203.0.113.0/24", "192.0.2.0/24"},
		Private:       []string{private},
		Images:        tarballs,
		LoadBalancers: vcohost.LoadBalancers{Sim: sim},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Down(context.Background()); err != nil {
			t.Error(err)
		}
		if left, _ := localcluster.Leftovers(localcluster.Options{Name: name}); len(left) > 0 {
			t.Errorf("left behind on the machine: %v", left)
		}
	})
	sim.SetVMHost(vcohost.Machines{Platform: p})
	ln, err := p.Listen(apiAddr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() }) // before the platform goes: it listens in the router
	return sim, p, srv
}

// buildCCMImage builds the CCM static and into an image (test/images), cached by content.
func buildCCMImage(t *testing.T, ctx context.Context, root string) images.Built {
	t.Helper()
	// A folder of its own: the e2e suites' images (test/images.BuildLocal) stay as they are.
	dir := filepath.Join(root, "_artifacts", "images-platform")
	b, err := images.WriteCached(ccmRepo, ccmImageSpec(t, ctx, root, filepath.Join(dir, "bin", "capvco-cloud-controller-manager")), dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ccmImageSpec builds the CCM static at bin and returns its image (the binary, as a non-root
// user).
func ccmImageSpec(t *testing.T, ctx context.Context, root, bin string) images.Spec {
	t.Helper()
	if err := images.GoBuildStatic(ctx, root, ccmPackage, bin); err != nil {
		t.Fatal(err)
	}
	return images.Spec{
		Files:      []images.File{{Path: "/capvco-cloud-controller-manager", Source: bin, Mode: 0o755}},
		Entrypoint: []string{"/capvco-cloud-controller-manager"},
		User:       images.NonRootUser,
	}
}
