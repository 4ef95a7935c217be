//go:build e2e

package csi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/capvco/csi"
	"github.com/capx-io/capx/internal/capvco/csi/config"
	"github.com/capx-io/capx/internal/capvco/csi/csitest"
	"github.com/capx-io/capx/internal/capvco/csi/device"
	"github.com/capx-io/capx/internal/capvco/csi/luks"
	"github.com/capx-io/capx/internal/capvco/csi/manifests"
	"github.com/capx-io/capx/internal/capvco/csi/transit/transittest"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/manifest"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/test/localcluster"
	"github.com/capx-io/capx/test/localcluster/vcohost"
)

const (
	platformName = "csie2e"
	namespace    = "team-s"
	clusterName  = "vols"
	cidr         = "192.168.104.0/24"
	transitKey   = "capvco-volumes"
	vaultToken   = "s.csi-e2e-token"
	uninitTaint  = "node.cloudprovider.kubernetes.io/uninitialized"
	plainClass   = "capvco-disk"
	cryptClass   = "capvco-disk-encrypted"
	snapClass    = "capvco-disk"
	podNS        = "default"
)

var snapshotGVK = schema.GroupVersionKind{Group: "snapshot.storage.k8s.io", Version: "v1", Kind: "VolumeSnapshot"}

// TestVolumesOnRealKubelets: capvco-csi-driver on the whitesky.cloud simulator, driven by the
// real external-provisioner, external-attacher, csi-snapshotter and snapshot-controller, for
// the real kubelets of three simulated VMs (a control plane and two workers) whose disks are
// loop devices the simulator's attach links by serial into the VM's by-id folder. A Pod writes
// to a PVC on one worker and keeps it in use; the worker drained (cordoned, the Pod evicted),
// the Pod is recreated on the other worker and reads the data back (the kubelet unmounted the
// volume, the attacher detached the disk from the first VM and attached it to the second); a
// VolumeSnapshot of the PVC restores into a new PVC with the same data; an encrypted PVC's
// data is not on its raw device in plain (or, on a kernel without dm-crypt, the Pod is refused
// with that reason); deleting the PVCs and the snapshot leaves no disk, snapshot or disk file.
//
// The driver's controller and node services run in this process (as the Deployment's and the
// DaemonSet's containers would), the node service registered with each kubelet by this test's
// registrar: the node-driver-registrar's module is not served by the Go module proxy.
func TestVolumesOnRealKubelets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	begin := time.Now()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	requireSidecars(t, root)
	if err := localcluster.DownPlatform(ctx, localcluster.PlatformOptions{Name: platformName}); err != nil {
		t.Fatalf("an earlier run's platform: %v", err)
	}
	img := volfileImage(t, ctx, root)

	sim, err := vcosim.New(vcosim.Options{TimeScale: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	loops := csitest.NewLoops(t)
	sim.SetDiskDevices(loops)
	p, err := localcluster.UpPlatform(ctx, localcluster.PlatformOptions{
		Name: platformName, Public: []string{"203.0.113.0/24"}, Private: []string{cidr},
		Images: []string{img.Tarball}, LoadBalancers: vcohost.LoadBalancers{Sim: sim},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Down(context.Background()); err != nil {
			t.Error(err)
		}
		if left, _ := localcluster.Leftovers(localcluster.Options{Name: platformName}); len(left) > 0 {
			t.Errorf("left behind on the machine: %v", left)
		}
	})
	sim.SetVMHost(vcohost.Machines{Platform: p})
	// The driver's controller, like this test, calls the API on loopback.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	apiURL := "http://" + ln.Addr().String() + "/api/1"
	jwt, err := sim.Token(vcosim.SeedClusterPrinc, 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	vc, err := vco.New(vco.Credentials{URL: apiURL, Customer: vcosim.SeedCustomer, JWT: jwt}, vco.Options{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}

	// The cluster as CAPVCO builds it: cloudspace, the API server's load balancer, VMs.
	site := config.Site{Name: names.PrimarySite, Location: vcosim.SeedLocation}
	csID, err := vc.CreateCloudspace(ctx, vco.CreateCloudspaceRequest{Name: names.Cloudspace(namespace, clusterName, site.Name),
		Location: site.Location, PrivateNetwork: cidr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vcohost.DeleteCluster(context.Background(), vc, csID) })
	cs, err := vc.GetCloudspace(ctx, csID)
	if err != nil {
		t.Fatal(err)
	}
	poolID, err := vc.CreateServerPool(ctx, csID, names.APIServer(namespace, clusterName), "API server")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vc.CreateLoadBalancer(ctx, csID, vco.LoadBalancerSpec{Name: names.APIServer(namespace, clusterName), Type: "TCP",
		FrontEnd: vco.LBFrontEnd{Port: 6443, IPAddress: cs.ExternalNetworkIP}, BackEnd: vco.LBBackEnd{ServerPoolID: poolID, TargetPort: 6443}}); err != nil {
		t.Fatal(err)
	}
	endpoint := cs.ExternalNetworkIP + ":6443"
	secrets, err := localcluster.NewClusterSecrets(clusterName)
	if err != nil {
		t.Fatal(err)
	}
	image, err := vc.FindImage(ctx, site.Location, vcosim.SeedImageName)
	if err != nil {
		t.Fatal(err)
	}
	vms := map[string]int{}
	createVM := func(name, role string) string {
		t.Helper()
		ud, err := secrets.Bootstrap(role, clusterName, endpoint, "10.96.0.0/16", "10.244.0.0/16").UserData()
		if err != nil {
			t.Fatal(err)
		}
		id, err := vc.CreateVM(ctx, csID, vco.CreateVMRequest{Name: name, Hostname: name, VCPUs: 2, MemoryMiB: 2048, ImageID: image.ID, UserData: string(ud)})
		if err != nil {
			t.Fatalf("creating VM %s: %v", name, err)
		}
		vm, err := vc.GetVM(ctx, csID, id)
		if err != nil || len(vm.NICs) == 0 {
			t.Fatalf("VM %s: %+v, %v", name, vm, err)
		}
		vms[name] = id
		return vm.NICs[0].IP
	}
	cpIP := createVM("vols-cp-0", localcluster.RoleControlPlane)
	if _, err := vc.AddPoolHost(ctx, csID, poolID, cpIP); err != nil {
		t.Fatal(err)
	}
	workers := []string{"vols-md-0", "vols-md-1"}
	for _, w := range workers {
		createVM(w, localcluster.RoleWorker)
	}

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
	cl, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	work := shortDir(t)
	logDir := filepath.Join(root, "_artifacts", "csi-e2e")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	var sidecars []*sidecar
	wait := func(timeout time.Duration, what string, check func() error) {
		t.Helper()
		eventually(t, ctx, p, sidecars, timeout, what, check)
	}

	wait(12*time.Minute, "the three kubelets registered and Ready", func() error {
		nodes, err := wl.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var ready []string
		for _, n := range nodes.Items {
			if nodeReady(&n) {
				ready = append(ready, n.Name)
			}
		}
		if len(ready) != 3 {
			return fmt.Errorf("ready nodes %v", ready)
		}
		return nil
	})
	t.Logf("three Nodes Ready %.0fs after the start", time.Since(begin).Seconds())

	// The driver: its own location-scoped credential, the transit key for encrypted volumes.
	if _, err := sim.AddPrincipal(vcosim.Principal{Name: "csi", Customer: vcosim.SeedCustomer,
		Grants: []vcosim.Grant{{ResourceType: "location", ResourceID: site.Location}}}); err != nil {
		t.Fatal(err)
	}
	csiJWT, err := sim.Token("csi", 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	credDir := filepath.Join(work, "credentials")
	writeFiles(t, credDir, map[string]string{vco.SecretKeyURL: apiURL, vco.SecretKeyCustomer: vcosim.SeedCustomer, vco.SecretKeyJWT: csiJWT})
	vault := transittest.New(t, "transit", vaultToken, transitKey)
	writeFiles(t, filepath.Join(work, "vault"), map[string]string{"token": vaultToken + "\n"})
	enc := config.Encryption{VaultMode: config.VaultExternal, Transit: &config.Transit{Address: vault.URL, Key: transitKey,
		TokenFile: filepath.Join(work, "vault", "token")}}
	dcfg := config.Config{CredentialsDir: credDir, Cluster: config.Cluster{Namespace: namespace, Name: clusterName},
		Sites: []config.Site{site}, Encryption: enc}
	if err := dcfg.Validate(); err != nil {
		t.Fatal(err)
	}
	keys, err := csi.Keys(enc)
	if err != nil {
		t.Fatal(err)
	}
	platform := vco.NewFactory(vco.Options{})
	ctrl := &csi.Controller{Config: dcfg, Keys: keys, Platform: func() (csi.Platform, error) {
		creds, err := dcfg.Credentials()
		if err != nil {
			return nil, err
		}
		return platform.Client(creds)
	}}
	if err := ctrl.CheckGrant(ctx); err != nil {
		t.Fatal(err)
	}
	ctrlSock := filepath.Join(work, "controller.sock")
	serveDriver(t, &csi.Driver{Config: dcfg, Controller: ctrl}, ctrlSock)

	// A node service per worker, on the socket the kubelet is told of, finding disks in the
	// by-id folder the simulator's attach links them into for that VM.
	nodeCfg := dcfg
	nodeCfg.CredentialsDir = ""
	for _, w := range workers {
		ms, ok := p.MachineStatus(vms[w])
		if !ok {
			t.Fatalf("no machine for %s", w)
		}
		kubeletDir := filepath.Join(ms.Dir, "kubelet")
		n, err := csi.NewNode(names.ProviderID(site.Location, vms[w]), vcosim.DefaultMaxVMDisks-1, device.Finder{Dir: loops.ByIDDir(vms[w])}, keys)
		if err != nil {
			t.Fatal(err)
		}
		sock := filepath.Join(kubeletDir, "plugins", csi.DriverName, "csi.sock")
		if err := os.MkdirAll(filepath.Dir(sock), 0o750); err != nil {
			t.Fatal(err)
		}
		serveDriver(t, &csi.Driver{Config: nodeCfg, Node: n}, sock)
		register(t, kubeletDir, sock)
	}
	wait(2*time.Minute, "each worker's CSINode with the driver and its Node with the location label", func() error {
		for _, w := range workers {
			cn, err := wl.StorageV1().CSINodes().Get(ctx, w, metav1.GetOptions{})
			if err != nil {
				return err
			}
			i := slices.IndexFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == csi.DriverName })
			if i < 0 || cn.Spec.Drivers[i].NodeID != names.ProviderID(site.Location, vms[w]) {
				return fmt.Errorf("CSINode %s drivers %+v", w, cn.Spec.Drivers)
			}
			n, err := wl.CoreV1().Nodes().Get(ctx, w, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if n.Labels[csi.TopologyLocation] != site.Location {
				return fmt.Errorf("node %s labels %v", w, n.Labels)
			}
		}
		return nil
	})

	// What the add-on applies, less the Deployment and DaemonSet whose containers this test
	// runs itself: the CSIDriver, the StorageClasses, the VolumeSnapshotClass; and the
	// snapshot CRDs, which the cluster must have.
	applyFiles(t, ctx, cl, filepath.Join(root, "bin", snapshotCRDs))
	wait(time.Minute, "the snapshot CRDs served", func() error {
		_, err := listSnapshots(ctx, cl)
		return err
	})
	stream, err := manifests.Render(manifests.Options{
		Images:            manifests.Images{Driver: "in-test", Provisioner: "in-test", Attacher: "in-test", Resizer: "in-test", Snapshotter: "in-test", Registrar: "in-test"},
		CredentialsSecret: "capvco-csi-credentials", Cluster: dcfg.Cluster, Sites: dcfg.Sites,
		Encryption: config.Encryption{VaultMode: config.VaultExternal, Transit: &config.Transit{Address: vault.URL, Key: transitKey}}, TransitTokenSecret: "capvco-vault-token",
	})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Objects(stream)
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	sidecarArgs := map[string][]string{}
	for _, o := range objs {
		switch o.GetKind() {
		case "CSIDriver", "StorageClass", "VolumeSnapshotClass":
			if err := cl.Create(ctx, o); err != nil {
				t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
			}
			applied++
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			// The controller's identity and RBAC, which the sidecars run with below.
			if err := cl.Create(ctx, o); err != nil {
				t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		case "Deployment":
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				m, _ := c.(map[string]any)
				name, _ := m["name"].(string)
				args, _, _ := unstructured.NestedStringSlice(m, "args")
				sidecarArgs[name] = args
			}
		}
	}
	if applied != 4 {
		t.Fatalf("applied %d of the add-on's CSIDriver, StorageClasses and VolumeSnapshotClass, want 4", applied)
	}

	// The real sidecars as the add-on's controller Deployment runs them: its flags, with a
	// token of its ServiceAccount (so its RBAC is what they may do), but for the socket and a
	// shorter retry backoff (at most 5 s rather than 5 minutes).
	sidecarKubeconfig := serviceAccountKubeconfig(t, ctx, wl, kc, "kube-system", "capvco-csi-controller", filepath.Join(work, "sidecars.kubeconfig"))
	run := func(name string, extra ...string) *sidecar {
		args, ok := sidecarArgs[name]
		if !ok {
			t.Fatalf("the add-on's Deployment has no %s container", name)
		}
		args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, "--csi-address=") })
		return startSidecar(t, root, p, logDir, name, slices.Concat(args, []string{"--csi-address=" + ctrlSock, "--kubeconfig=" + sidecarKubeconfig,
			"--retry-interval-max=5s", "--v=2"}, extra)...)
	}
	sidecars = append(sidecars, run("csi-provisioner"), run("csi-attacher"), run("csi-snapshotter"),
		// Not part of the add-on: a cluster's snapshot controller.
		startSidecar(t, root, p, logDir, "snapshot-controller", "--kubeconfig="+kubeconfig, "--leader-election=false",
			"--retry-interval-max=5s", "--v=2"))
	t.Logf("driver and sidecars up %.0fs after the start (sidecar logs in %s)", time.Since(begin).Seconds(), logDir)

	marker := "capx-csi-e2e " + randomHex(t)
	pods := podRunner{t: t, ctx: ctx, wl: wl, image: img.Ref, wait: wait}

	// A PVC written on one worker by a Pod that keeps it in use.
	start := time.Now()
	createPVC(t, ctx, wl, "data", plainClass, nil)
	pods.hold("writer", workers[0], "data", "/data/marker", marker)
	pv := boundPV(t, ctx, wl, "data")
	_, dataDisk, err := csi.ParseVolumeID(pv.Spec.CSI.VolumeHandle)
	if err != nil {
		t.Fatal(err)
	}
	if err := affinityToLocation(pv, site.Location); err != nil {
		t.Error(err)
	}
	if vm := diskVM(sim, dataDisk); vm != vms[workers[0]] {
		t.Errorf("disk %d is on VM %d, want %s's %d", dataDisk, vm, workers[0], vms[workers[0]])
	}
	t.Logf("PVC provisioned and written on %s in %.0fs (disk %d)", workers[0], time.Since(start).Seconds(), dataDisk)
	// The plain disk holds the marker as written: what the encrypted one must not.
	if !diskHolds(t, loops, dataDisk, []byte(marker)) {
		t.Errorf("the plain disk %d does not hold the marker on its raw device: the raw check below could not fail", dataDisk)
	}

	// The worker is drained as kubectl drain does (cordon, then evict): the Pod, its volume
	// still mounted, goes, and recreated on the other worker it reads what it wrote.
	start = time.Now()
	setUnschedulable(t, ctx, wl, workers[0], true)
	if err := wl.PolicyV1().Evictions(podNS).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "writer", Namespace: podNS}}); err != nil {
		t.Fatalf("evicting the writer: %v", err)
	}
	pods.gone("writer")
	// The reader keeps running: once a Pod has ended its kubelet unmounts the volume and the
	// attach-detach controller may detach it before the attachment below is looked at.
	if out := pods.show("reader", workers[1], "data", "/data/marker"); out != marker {
		t.Fatalf("the reader on %s read %q, want %q", workers[1], out, marker)
	}
	if vm := diskVM(sim, dataDisk); vm != vms[workers[1]] {
		t.Errorf("disk %d is on VM %d after the move, want %s's %d", dataDisk, vm, workers[1], vms[workers[1]])
	}
	t.Logf("%s drained: the Pod moved to %s and read its data %.0fs after the eviction", workers[0], workers[1], time.Since(start).Seconds())
	pods.delete("reader")
	setUnschedulable(t, ctx, wl, workers[0], false)

	// A snapshot of the PVC restores into a new PVC with the same data.
	start = time.Now()
	snap := &unstructured.Unstructured{}
	snap.SetGroupVersionKind(snapshotGVK)
	snap.SetName("data-snap")
	snap.SetNamespace(podNS)
	_ = unstructured.SetNestedField(snap.Object, snapClass, "spec", "volumeSnapshotClassName")
	_ = unstructured.SetNestedField(snap.Object, "data", "spec", "source", "persistentVolumeClaimName")
	if err := cl.Create(ctx, snap); err != nil {
		t.Fatal(err)
	}
	wait(3*time.Minute, "the VolumeSnapshot ready to use", func() error {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(snapshotGVK)
		if err := cl.Get(ctx, client.ObjectKey{Namespace: podNS, Name: "data-snap"}, got); err != nil {
			return err
		}
		if ready, _, _ := unstructured.NestedBool(got.Object, "status", "readyToUse"); !ready {
			st, _, _ := unstructured.NestedMap(got.Object, "status")
			return fmt.Errorf("status %v", st)
		}
		return nil
	})
	apiGroup := "snapshot.storage.k8s.io"
	createPVC(t, ctx, wl, "restored", plainClass, &corev1.TypedObjectReference{APIGroup: &apiGroup, Kind: "VolumeSnapshot", Name: "data-snap"})
	if out := pods.run("restore-reader", workers[0], "restored", "read", "/data/marker"); out != marker {
		t.Fatalf("the restored PVC holds %q, want %q", out, marker)
	}
	t.Logf("snapshot taken and restored into a new PVC, data read back, in %.0fs", time.Since(start).Seconds())
	pods.delete("restore-reader")

	// An encrypted PVC: what the Pod writes is not on the raw device in plain.
	start = time.Now()
	secret := "capx-csi-e2e-secret " + randomHex(t)
	createPVC(t, ctx, wl, "sealed", cryptClass, nil)
	if dmErr := (luks.Cryptsetup{}).Check(); dmErr != nil {
		// The kernel cannot map devices: the kubelet's NodeStage fails with that reason, and
		// the Pod does not start on a volume that would be plain.
		pods.create("sealed-writer", workers[0], "sealed", "write", "/data/marker", secret)
		wait(3*time.Minute, "the encrypted volume refused for want of dm-crypt", func() error {
			return mountFailedWith(ctx, wl, "sealed-writer", "device mapper")
		})
		t.Logf("this kernel has no dm-crypt (%v): the encrypted PVC's Pod was refused with that reason in %.0fs; the raw-device check did not run", dmErr, time.Since(start).Seconds())
	} else {
		if out := pods.run("sealed-writer", workers[0], "sealed", "write", "/data/marker", secret); !strings.Contains(out, "wrote") {
			t.Fatalf("the encrypted writer printed %q", out)
		}
		spv := boundPV(t, ctx, wl, "sealed")
		_, sealedDisk, err := csi.ParseVolumeID(spv.Spec.CSI.VolumeHandle)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(diskHead(t, loops, sealedDisk, 6), []byte("LUKS\xba\xbe")) {
			t.Errorf("encrypted disk %d does not start with a LUKS header", sealedDisk)
		}
		if diskHolds(t, loops, sealedDisk, []byte(secret)) {
			t.Errorf("encrypted disk %d holds the Pod's data in plain on its raw device", sealedDisk)
		}
		t.Logf("encrypted PVC written through dm-crypt, its raw disk %d without the plaintext, in %.0fs", sealedDisk, time.Since(start).Seconds())
	}
	pods.delete("sealed-writer")

	// Deleting the snapshot and the PVCs leaves nothing: no disk of the cluster's, in use or
	// in the recycle bin, no snapshot, no disk file.
	start = time.Now()
	var disks []int
	for _, name := range []string{"data", "restored", "sealed"} {
		pv := boundPV(t, ctx, wl, name)
		_, id, err := csi.ParseVolumeID(pv.Spec.CSI.VolumeHandle)
		if err != nil {
			t.Fatal(err)
		}
		disks = append(disks, id)
	}
	if err := cl.Delete(ctx, snap); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"restored", "data", "sealed"} {
		if err := wl.CoreV1().PersistentVolumeClaims(podNS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wait(4*time.Minute, "no PV, VolumeSnapshot or VolumeAttachment left", func() error {
		pvs, err := wl.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		vas, err := wl.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		snaps, err := listSnapshots(ctx, cl)
		if err != nil {
			return err
		}
		if len(pvs.Items)+len(vas.Items)+snaps > 0 {
			return fmt.Errorf("%d PVs, %d VolumeAttachments, %d VolumeSnapshots", len(pvs.Items), len(vas.Items), snaps)
		}
		return nil
	})
	wait(time.Minute, "nothing of the volumes left in the simulator", func() error {
		return volumesLeft(sim, loops, disks)
	})
	t.Logf("snapshot and PVCs deleted, nothing left in the simulator, in %.0fs", time.Since(start).Seconds())

	// The cluster goes as CAPVCO deletes it: nothing billed is left.
	if err := vcohost.DeleteCluster(ctx, vc, csID); err != nil {
		t.Fatal(err)
	}
	if billed := sim.Billed(); len(billed) > 0 {
		t.Errorf("billed on the platform after the cluster's deletion: %+v", billed)
	}
	t.Logf("the whole test: %.0fs", time.Since(begin).Seconds())
}

// serviceAccountKubeconfig writes the admin kubeconfig with a token of the ServiceAccount
// instead of the admin's certificate.
func serviceAccountKubeconfig(t *testing.T, ctx context.Context, wl kubernetes.Interface, admin []byte, ns, sa, path string) string {
	t.Helper()
	var tok *authenticationv1.TokenRequest
	var err error
	for i := 0; i < 30; i++ { // the ServiceAccount may not be there for the API server yet
		tok, err = wl.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
		if err == nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		t.Fatalf("a token of %s/%s: %v", ns, sa, err)
	}
	kcfg, err := clientcmd.Load(admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range kcfg.AuthInfos {
		a.ClientCertificateData, a.ClientKeyData, a.Token = nil, nil, tok.Status.Token
	}
	if err := clientcmd.WriteToFile(*kcfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// podRunner runs the test's Pods: volfile with one PVC at /data, on a chosen worker.
type podRunner struct {
	t     *testing.T
	ctx   context.Context
	wl    kubernetes.Interface
	image string
	wait  func(time.Duration, string, func() error)
}

func (r podRunner) create(name, node, pvc string, args ...string) {
	r.t.Helper()
	fsGroup := int64(65532)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: podNS}, Spec: corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: new(int64),
		NodeSelector:                  map[string]string{corev1.LabelHostname: node},
		// No cloud controller manager runs here: the Nodes keep the uninitialised taint.
		Tolerations:     []corev1.Toleration{{Key: uninitTaint, Operator: corev1.TolerationOpExists}},
		SecurityContext: &corev1.PodSecurityContext{FSGroup: &fsGroup},
		Containers: []corev1.Container{{Name: "volfile", Image: r.image, ImagePullPolicy: corev1.PullNever, Args: args,
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc}}}},
	}}
	if _, err := r.wl.CoreV1().Pods(podNS).Create(r.ctx, pod, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

// hold creates a Pod that writes text and keeps running, and waits until it has written.
func (r podRunner) hold(name, node, pvc, path, text string) {
	r.t.Helper()
	r.create(name, node, pvc, "hold", path, text)
	r.running(name, node, "written", func(logs string) bool { return strings.Contains(logs, "wrote") })
}

// show creates a Pod that prints the file and keeps running (its volume stays attached while
// the test looks), waits until it has printed, and returns what it printed.
func (r podRunner) show(name, node, pvc, path string) string {
	r.t.Helper()
	r.create(name, node, pvc, "show", path)
	var out string
	r.running(name, node, "has read", func(logs string) bool { out = logs; return logs != "" })
	return strings.TrimSpace(out)
}

// running waits until the Pod runs and its output satisfies done.
func (r podRunner) running(name, node, what string, done func(logs string) bool) {
	r.t.Helper()
	r.wait(5*time.Minute, "pod "+name+" running on "+node+" and "+what, func() error {
		p, err := r.wl.CoreV1().Pods(podNS).Get(r.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			if p.Status.Phase != corev1.PodPending {
				return stop{fmt.Errorf("phase %s", p.Status.Phase)}
			}
			return fmt.Errorf("phase %s; events: %s", p.Status.Phase, podEvents(r.ctx, r.wl, name))
		}
		logs, err := r.wl.CoreV1().Pods(podNS).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(r.ctx)
		if err != nil || !done(string(logs)) {
			return fmt.Errorf("not %s yet: %q %v", what, logs, err)
		}
		return nil
	})
}

// run creates the Pod, waits for it to succeed and returns its output.
func (r podRunner) run(name, node, pvc string, args ...string) string {
	r.t.Helper()
	r.create(name, node, pvc, args...)
	r.wait(5*time.Minute, "pod "+name+" succeeded on "+node, func() error {
		p, err := r.wl.CoreV1().Pods(podNS).Get(r.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			if p.Spec.NodeName != node {
				return stop{fmt.Errorf("ran on %q", p.Spec.NodeName)}
			}
			return nil
		case corev1.PodFailed:
			logs, _ := r.wl.CoreV1().Pods(podNS).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(r.ctx)
			return stop{fmt.Errorf("failed: %s", logs)}
		}
		return fmt.Errorf("phase %s; events: %s", p.Status.Phase, podEvents(r.ctx, r.wl, name))
	})
	logs, err := r.wl.CoreV1().Pods(podNS).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(r.ctx)
	if err != nil {
		r.t.Fatalf("logs of %s: %v", name, err)
	}
	return strings.TrimSpace(string(logs))
}

// delete deletes the Pod and waits until it is gone, its volume unmounted by its kubelet.
func (r podRunner) delete(name string) {
	r.t.Helper()
	if err := r.wl.CoreV1().Pods(podNS).Delete(r.ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		r.t.Fatal(err)
	}
	r.gone(name)
}

// gone waits until the Pod is gone.
func (r podRunner) gone(name string) {
	r.t.Helper()
	r.wait(3*time.Minute, "pod "+name+" gone", func() error {
		_, err := r.wl.CoreV1().Pods(podNS).Get(r.ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
}

// setUnschedulable cordons or uncordons a Node.
func setUnschedulable(t *testing.T, ctx context.Context, wl kubernetes.Interface, node string, on bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	if _, err := wl.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("cordon %s=%t: %v", node, on, err)
	}
}

func podEvents(ctx context.Context, wl kubernetes.Interface, pod string) string {
	evs, err := wl.CoreV1().Events(podNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range evs.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return joinLines(out)
}

// mountFailedWith passes once the Pod has a FailedMount event saying why.
func mountFailedWith(ctx context.Context, wl kubernetes.Interface, pod, why string) error {
	evs, err := wl.CoreV1().Events(podNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		return err
	}
	for _, e := range evs.Items {
		if e.Reason == "FailedMount" && strings.Contains(e.Message, why) {
			return nil
		}
	}
	p, err := wl.CoreV1().Pods(podNS).Get(ctx, pod, metav1.GetOptions{})
	if err == nil && p.Status.Phase != corev1.PodPending {
		return stop{fmt.Errorf("the Pod on the encrypted volume is %s, want it held Pending", p.Status.Phase)}
	}
	return fmt.Errorf("no FailedMount event naming %q yet; events: %s", why, podEvents(ctx, wl, pod))
}

func createPVC(t *testing.T, ctx context.Context, wl kubernetes.Interface, name, class string, source *corev1.TypedObjectReference) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: podNS}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName: &class,
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		DataSourceRef:    source,
	}}
	if _, err := wl.CoreV1().PersistentVolumeClaims(podNS).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func boundPV(t *testing.T, ctx context.Context, wl kubernetes.Interface, pvc string) *corev1.PersistentVolume {
	t.Helper()
	c, err := wl.CoreV1().PersistentVolumeClaims(podNS).Get(ctx, pvc, metav1.GetOptions{})
	if err != nil || c.Spec.VolumeName == "" {
		t.Fatalf("PVC %s is not bound: %v", pvc, err)
	}
	pv, err := wl.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != csi.DriverName {
		t.Fatalf("PV %s is not the driver's: %+v", pv.Name, pv.Spec.PersistentVolumeSource)
	}
	return pv
}

// affinityToLocation checks the PV's node affinity pins it to the disk's location.
func affinityToLocation(pv *corev1.PersistentVolume, location string) error {
	if pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity.Required != nil {
		for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				if e.Key == csi.TopologyLocation && e.Operator == corev1.NodeSelectorOpIn && slices.Equal(e.Values, []string{location}) {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("PV %s has no node affinity to %s=%s: %+v", pv.Name, csi.TopologyLocation, location, pv.Spec.NodeAffinity)
}

// diskVM is the VM the simulator has the disk attached to (0: none).
func diskVM(sim *vcosim.Sim, diskID int) int {
	for _, d := range sim.Snapshot().Disks {
		if d.ID == diskID {
			return d.VMID
		}
	}
	return 0
}

// diskHolds reports whether the disk's raw content (its loop device's backing file, what
// the VM's block device shows) contains text, reading it in pieces.
func diskHolds(t *testing.T, loops *csitest.Loops, diskID int, text []byte) bool {
	t.Helper()
	f, err := os.Open(loops.DiskFile(diskID))
	if err != nil {
		t.Fatalf("the raw content of disk %d: %v", diskID, err)
	}
	defer f.Close()
	buf := make([]byte, 4<<20)
	var carry []byte
	for {
		n, err := f.Read(buf)
		if n > 0 {
			chunk := append(carry, buf[:n]...)
			if bytes.Contains(chunk, text) {
				return true
			}
			carry = append([]byte(nil), chunk[max(0, len(chunk)-len(text)+1):]...)
		}
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			t.Fatalf("reading disk %d: %v", diskID, err)
		}
	}
}

// diskHead is the first bytes of the disk's raw content.
func diskHead(t *testing.T, loops *csitest.Loops, diskID, n int) []byte {
	t.Helper()
	f, err := os.Open(loops.DiskFile(diskID))
	if err != nil {
		t.Fatalf("the raw content of disk %d: %v", diskID, err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(f, b); err != nil {
		t.Fatalf("reading disk %d: %v", diskID, err)
	}
	return b
}

// volumesLeft names what the simulator or the disk harness still holds of the volumes.
func volumesLeft(sim *vcosim.Sim, loops *csitest.Loops, disks []int) error {
	var left []string
	for _, d := range sim.Snapshot().Disks {
		if slices.Contains(disks, d.ID) || strings.Contains(d.Description, "cluster="+namespace+"/"+clusterName) {
			left = append(left, fmt.Sprintf("disk %d (%s, deleted %v, %d snapshots)", d.ID, d.Name, d.DeletedAt != nil, len(d.Snapshots)))
		}
	}
	for _, b := range sim.Billed() {
		if b.Kind == "disk" && b.InRecycleBin {
			left = append(left, "disk "+b.ID+" in the recycle bin")
		}
	}
	for _, id := range disks {
		if _, err := os.Stat(loops.DiskFile(id)); err == nil {
			left = append(left, loops.DiskFile(id))
		}
		if l := loops.Loop(id); l != "" {
			left = append(left, "loop device "+l)
		}
	}
	if snaps, _ := filepath.Glob(filepath.Join(loops.Root, "snapshots", "*")); len(snaps) > 0 {
		left = append(left, snaps...)
	}
	if len(left) > 0 {
		return fmt.Errorf("left: %s", strings.Join(left, "; "))
	}
	return nil
}

func listSnapshots(ctx context.Context, cl client.Client) (int, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(snapshotGVK.GroupVersion().WithKind("VolumeSnapshotList"))
	if err := cl.List(ctx, l); err != nil {
		return 0, err
	}
	return len(l.Items), nil
}

// applyFiles creates every object of the YAML files in dir.
func applyFiles(t *testing.T, ctx context.Context, cl client.Client, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no YAML in %s (%v): run hack/csi-sidecars.sh", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifest.Objects(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range objs {
			if err := cl.Create(ctx, o); err != nil {
				t.Fatalf("%s: creating %s %s: %v", f, o.GetKind(), o.GetName(), err)
			}
		}
	}
}

// serveDriver runs the driver on a unix socket until the test ends.
func serveDriver(t *testing.T, d *csi.Driver, sock string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, "unix://"+sock) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the driver did not stop")
		}
	})
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(sock); err == nil {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("the driver does not listen on %s", sock)
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for k, v := range files {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
