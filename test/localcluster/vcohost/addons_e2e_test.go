//go:build e2e

package vcohost_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/addons"
	"github.com/capx-io/capx/internal/capvco/gpuaddon"
	"github.com/capx-io/capx/internal/capvco/sriov"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/test/images"
	"github.com/capx-io/capx/test/localcluster"
)

const (
	addonsPlatform   = "vcoa"
	addonsCluster    = "wla"
	addonsPrivateNet = "192.168.105.0/24"
	sriovComponent   = "capvco-sriov-agent"
	sriovPlugin      = "capvco-sriov" // the CNI plugin the agent installs on its node
	sriovSecret      = "sriov-credentials"
	standinRepo      = "capx.local/standin-device-plugin"
	standinPackage   = "github.com/capx-io/capx/test/localcluster/vcohost/standinplugin"
	devicePluginDS   = "nvidia-device-plugin"
	standinDevices   = 2 // what test/localcluster/vcohost/standinplugin advertises
)

// TestManagerDeliversGPUAndSRIOV: a VCOCluster that selects the GPU add-on (nvidia) and sets
// spec.sriov.enabled, formed of real nodes as in TestManagerFormsARealCluster. While the SR-IOV
// credential Secret does not exist, SRIOVAgentReady is False and says so, and AddonsReady names
// the agent as failed. The GPU add-on's DaemonSet, delivered by the manager with the stand-in
// device plugin's image in place of NVIDIA's (--capvco-addon-image), runs on the worker once
// its Node carries the accelerator label, under the nvidia RuntimeClass, and registers with
// the worker's kubelet: the Node's allocatable shows nvidia.com/gpu, the control plane's does
// not. Once the operator creates the agent's credential (a principal scoped to the cluster's
// cloudspace), the manager copies it into whitesky-sriov-cni and the agent's DaemonSet Pod
// runs Ready on the worker only, having found its VM through the platform API;
// SRIOVAgentReady and AddonsReady turn True and status.addons records both add-ons as
// available at the manager's version, read after their Pods ran. The credential changed to a
// principal's without any grant, the manager copies it, a new agent Pod finds its VM in no
// cloudspace and exits, and SRIOVAgentReady is False (AgentNotReady, 0 of 1 nodes).
func TestManagerDeliversGPUAndSRIOV(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// The agent and the stand-in use the host's paths of their hostPath volumes (these
	// machines share the host's file system); what they create there goes after the platform.
	removeCreatedHostPaths(t, "/opt/cni", filepath.Join("/opt/cni/bin", sriovPlugin), filepath.Dir(sriov.DefaultSocket),
		"/var/lib/capvco-sriov", filepath.Join(pluginapi.DevicePluginPath, "capx-standin-1.sock"))
	start := time.Now()
	tarballs := slices.Concat(buildVersionedCCMImages(t, ctx, root, addonVersion), buildSRIOVAgentImage(t, ctx, root, addonVersion))
	standinImg := buildStandinImage(t, ctx, root)
	t.Logf("add-on images ready in %.0fs (device plugin stand-in %s)", time.Since(start).Seconds(), standinImg.Ref)

	mc := formManagedCluster(t, ctx, managedOptions{platform: addonsPlatform, private: addonsPrivateNet, cluster: addonsCluster,
		tarballs: append(tarballs, standinImg.Tarball),
		images:   map[string]string{"nvidia-device-plugin": standinImg.Ref},
		// Available add-ons are read again this often, so status follows the Pods in the test's time.
		resync: 10 * time.Second,
		vcoCluster: func(vc *capvcov1.VCOCluster) {
			vc.Spec.Addons.GPU = &capvcov1.GPUAddonSpec{Addon: string(gpuaddon.NVIDIA)}
			vc.Spec.SRIOV = &capvcov1.SRIOVSpec{Enabled: true, CredentialSecretRef: &corev1.LocalObjectReference{Name: sriovSecret}}
		}})
	m, vc, wl, p := mc.m, mc.vc, mc.wl, mc.p

	// Enabled without its credential: the agent cannot run, and the conditions say why.
	m.waitFor(vc, 2*time.Minute, "SRIOVAgentReady False for the missing credential", func() error {
		c := meta.FindStatusCondition(vc.Status.Conditions, capvcov1.SRIOVAgentReadyCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != sriov.ReasonCredentialNotFound || !strings.Contains(c.Message, sriovSecret) {
			return fmt.Errorf("SRIOVAgentReady %v", c)
		}
		a := meta.FindStatusCondition(vc.Status.Conditions, capvcov1.AddonsReadyCondition)
		if a == nil || a.Status != metav1.ConditionFalse || !strings.Contains(a.Message, "sriov-agent: ") || !strings.Contains(a.Message, sriovSecret) {
			return fmt.Errorf("AddonsReady %v", a)
		}
		return nil
	})
	t.Logf("SRIOVAgentReady without the credential: %s", meta.FindStatusCondition(vc.Status.Conditions, capvcov1.SRIOVAgentReadyCondition).Message)

	worker := workerOf(t, mc)
	// The kubelet's device manager serves the host's fixed /var/lib/kubelet/device-plugins,
	// shared by every kubelet on this host: the one started last owns it. Restarting the
	// worker's kubelet makes it that one, so the device plugin registers with it.
	restarted := time.Now()
	if err := p.StopKubelet(worker.ID); err != nil {
		t.Fatal(err)
	}
	if err := p.StartKubelet(worker.ID); err != nil {
		t.Fatal(err)
	}
	kubeletSock := pluginapi.KubeletSocket
	eventually(t, ctx, p, time.Minute, "the worker's kubelet serving "+kubeletSock, func() error {
		st, err := os.Stat(kubeletSock)
		if err != nil {
			return err
		}
		if st.ModTime().Before(restarted.Truncate(time.Second)) {
			return fmt.Errorf("%s is from %s, before the restart", kubeletSock, st.ModTime())
		}
		return nil
	})
	// What the GPU machine's bootstrap configuration sets (kubelet --node-labels from
	// gpuaddon.NodeLabels); the prepared nodes' bootstrap data has no labels, so here through
	// the API.
	label := gpuaddon.NodeLabels(gpuaddon.NVIDIA, &capvcov1.GPUSpec{Vendor: "nvidia", Count: 1})
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, gpuaddon.AcceleratorLabel, label[gpuaddon.AcceleratorLabel])
	eventually(t, ctx, p, time.Minute, "the worker's Node labelled", func() error {
		_, err := wl.CoreV1().Nodes().Patch(ctx, worker.Hostname, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	})
	start = time.Now()
	var dpPod corev1.Pod
	eventually(t, ctx, p, 4*time.Minute, "the device plugin registered with the worker's kubelet", func() error {
		pod, err := readyDaemonPod(ctx, wl, "kube-system", devicePluginDS, standinImg.Ref)
		if err != nil {
			return err
		}
		if pod.Spec.NodeName != worker.Hostname || pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != gpuaddon.RuntimeClassName {
			return stop{fmt.Errorf("the device plugin Pod %s runs on %q with RuntimeClass %v, want %s and %s", pod.Name,
				pod.Spec.NodeName, pod.Spec.RuntimeClassName, worker.Hostname, gpuaddon.RuntimeClassName)}
		}
		dpPod = *pod
		return gpuAllocatable(ctx, wl, worker.Hostname, standinDevices)
	})
	t.Logf("the device plugin Pod %s Ready and %d %s allocatable on %s %.0fs after the label", dpPod.Name, standinDevices,
		gpuaddon.ResourceName, worker.Hostname, time.Since(start).Seconds())
	if err := gpuAllocatable(ctx, wl, mc.cpNode, 0); err != nil {
		t.Errorf("the control plane, which has no accelerator label: %v", err)
	}

	// The operator's credential for the agent: a principal that may touch the cluster's
	// cloudspace only, at the address the workload cluster reaches the platform on.
	csID := vc.Status.Cloudspaces[0].ID
	if _, err := mc.sim.AddPrincipal(vcosim.Principal{Name: "sriov", Customer: vcosim.SeedCustomer,
		Grants: []vcosim.Grant{{ResourceType: "cloudspace", ResourceID: csID}}}); err != nil {
		t.Fatal(err)
	}
	jwt, err := mc.sim.Token("sriov", 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	m.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.ns, Name: sriovSecret}, Data: map[string][]byte{
		vco.SecretKeyURL: []byte("http://" + apiAddr + "/api/1"), vco.SecretKeyCustomer: []byte(vcosim.SeedCustomer), vco.SecretKeyJWT: []byte(jwt)}})
	start = time.Now()
	agentDS := strings.SplitN(addons.SRIOVAgentDaemonSet, "/", 2)
	var agentPod *corev1.Pod
	eventually(t, ctx, p, 4*time.Minute, "the SR-IOV agent Ready on the worker", func() error {
		pods, err := wl.CoreV1().Pods(sriov.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, pod := range pods.Items {
			if pod.Spec.NodeName == mc.cpNode {
				return stop{fmt.Errorf("the agent Pod %s runs on the control-plane node", pod.Name)}
			}
			if err := crashed(&pod, machineDirOf(p, &mc.vms[slices.IndexFunc(mc.vms, func(v capvcov1.VCOMachine) bool { return v.Name == worker.Hostname })])); err != nil {
				return stop{err}
			}
		}
		agentPod, err = readyDaemonPod(ctx, wl, agentDS[0], agentDS[1], addonImage(sriovComponent, addonVersion))
		return err
	})
	t.Logf("the SR-IOV agent Pod %s Ready on %s %.0fs after its credential was created", agentPod.Name, agentPod.Spec.NodeName, time.Since(start).Seconds())
	if agentPod.Spec.NodeName != worker.Hostname {
		t.Errorf("the agent runs on %s, want the worker %s", agentPod.Spec.NodeName, worker.Hostname)
	}
	copied, err := wl.CoreV1().Secrets(sriov.Namespace).Get(ctx, addons.SRIOVCredentialsSecret, metav1.GetOptions{})
	if err != nil || string(copied.Data[vco.SecretKeyJWT]) != jwt {
		t.Errorf("the agent's credential in the workload cluster is not the SR-IOV one (%v)", err)
	}
	if logs := podLogs(worker.Dir, *agentPod); !strings.Contains(logs, "serving the CNI plugin") || !strings.Contains(logs, csID) {
		t.Errorf("the agent's log does not say it found its VM in cloudspace %s:\n%s", csID, logs)
	}
	if st, err := os.Stat(filepath.Join("/opt/cni/bin", sriovPlugin)); err != nil || st.Mode()&0o111 == 0 {
		t.Errorf("the agent did not install its CNI plugin into the node's /opt/cni/bin: %v", err)
	}

	// The reports: read after the Pods ran, both add-ons available at the manager's version.
	ran := time.Now()
	m.waitFor(vc, 2*time.Minute, "SRIOVAgentReady and AddonsReady True, status.addons read after the Pods ran", func() error {
		if c := meta.FindStatusCondition(vc.Status.Conditions, capvcov1.SRIOVAgentReadyCondition); c == nil || c.Status != metav1.ConditionTrue ||
			c.Reason != sriov.ReasonReady || !strings.Contains(c.Message, "all 1 nodes") {
			return fmt.Errorf("SRIOVAgentReady %v", c)
		}
		a := meta.FindStatusCondition(vc.Status.Conditions, capvcov1.AddonsReadyCondition)
		if a == nil || a.Status != metav1.ConditionTrue {
			return fmt.Errorf("AddonsReady %v", a)
		}
		for _, name := range []string{(addons.GPU{}).Name(), (addons.SRIOVAgent{}).Name()} {
			if !strings.Contains(a.Message, name+" "+addonVersion) {
				return fmt.Errorf("AddonsReady does not name %s %s: %s", name, addonVersion, a.Message)
			}
			i := slices.IndexFunc(vc.Status.Addons, func(s capvcov1.AddonStatus) bool { return s.Name == name })
			if i < 0 {
				return fmt.Errorf("status.addons has no %s: %+v", name, vc.Status.Addons)
			}
			if s := vc.Status.Addons[i]; !s.Available || s.Version != addonVersion || s.CheckedAt == nil || s.CheckedAt.Time.Before(ran.Truncate(time.Second)) {
				return fmt.Errorf("status.addons %s: %+v", name, s)
			}
		}
		return nil
	})
	t.Logf("AddonsReady: %s", meta.FindStatusCondition(vc.Status.Conditions, capvcov1.AddonsReadyCondition).Message)
	t.Logf("SRIOVAgentReady: %s", meta.FindStatusCondition(vc.Status.Conditions, capvcov1.SRIOVAgentReadyCondition).Message)

	// The agent cannot run: its credential becomes a principal's with no grant, so a new agent
	// Pod finds its VM in no cloudspace and exits; SRIOVAgentReady says so.
	if _, err := mc.sim.AddPrincipal(vcosim.Principal{Name: "sriov-nogrant", Customer: vcosim.SeedCustomer}); err != nil {
		t.Fatal(err)
	}
	bad, err := mc.sim.Token("sriov-nogrant", 3*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cred := &corev1.Secret{}
	if err := m.env.Client.Get(ctx, types.NamespacedName{Namespace: m.ns, Name: sriovSecret}, cred); err != nil {
		t.Fatal(err)
	}
	cred.Data[vco.SecretKeyJWT] = []byte(bad)
	if err := m.env.Client.Update(ctx, cred); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, p, 2*time.Minute, "the changed credential copied into the workload cluster", func() error {
		s, err := wl.CoreV1().Secrets(sriov.Namespace).Get(ctx, addons.SRIOVCredentialsSecret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if string(s.Data[vco.SecretKeyJWT]) != bad {
			return errors.New("not yet")
		}
		return nil
	})
	if err := wl.CoreV1().Pods(sriov.Namespace).Delete(ctx, agentPod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	m.waitFor(vc, 3*time.Minute, "SRIOVAgentReady False while the agent cannot run", func() error {
		c := meta.FindStatusCondition(vc.Status.Conditions, capvcov1.SRIOVAgentReadyCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != sriov.ReasonAgentNotReady || !strings.Contains(c.Message, "0 of 1 nodes") {
			return fmt.Errorf("SRIOVAgentReady %v", c)
		}
		return nil
	})
	t.Logf("SRIOVAgentReady %.0fs after the agent Pod was replaced: %s", time.Since(start).Seconds(),
		meta.FindStatusCondition(vc.Status.Conditions, capvcov1.SRIOVAgentReadyCondition).Message)
	eventually(t, ctx, p, 2*time.Minute, "the agent exited for its VM found in no cloudspace", func() error {
		pods, err := wl.CoreV1().Pods(sriov.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pods.Items = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
		if len(pods.Items) != 1 {
			return fmt.Errorf("agent Pods %v", podSummary(pods))
		}
		exited := crashed(&pods.Items[0], worker.Dir)
		if exited == nil || !strings.Contains(exited.Error(), "none of the cloudspaces") {
			return fmt.Errorf("the agent Pod %s has not exited saying it found its VM in no cloudspace: %v", pods.Items[0].Name, exited)
		}
		return nil
	})
}

// workerOf is the platform machine of the cluster's worker.
func workerOf(t *testing.T, mc *managedCluster) localcluster.MachineStatus {
	t.Helper()
	for _, s := range mc.p.Machines() {
		if s.Hostname != mc.cpNode && s.State == localcluster.MachineRunning &&
			slices.ContainsFunc(mc.vms, func(v capvcov1.VCOMachine) bool { return v.Name == s.Hostname }) {
			return s
		}
	}
	t.Fatalf("no running worker machine among %+v", mc.p.Machines())
	return localcluster.MachineStatus{}
}

// readyDaemonPod is the one Pod of the DaemonSet namespace/name, running image and Ready; the
// DaemonSet's status must agree (one scheduled, one available).
func readyDaemonPod(ctx context.Context, wl kubernetes.Interface, namespace, name, image string) (*corev1.Pod, error) {
	ds, err := wl.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := wl.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
	if err != nil {
		return nil, err
	}
	pods.Items = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	if len(pods.Items) != 1 {
		return nil, fmt.Errorf("DaemonSet %s/%s has Pods %v", namespace, name, podSummary(pods))
	}
	pod := &pods.Items[0]
	if img := pod.Spec.Containers[0].Image; img != image {
		return nil, stop{fmt.Errorf("the Pod %s runs %s, want %s", pod.Name, img, image)}
	}
	if !podReady(pod) {
		return nil, fmt.Errorf("the Pod %s is %s, not Ready: %+v", pod.Name, pod.Status.Phase, pod.Status.ContainerStatuses)
	}
	if st := ds.Status; st.DesiredNumberScheduled != 1 || st.NumberAvailable != 1 {
		return nil, fmt.Errorf("DaemonSet %s/%s: %d scheduled, %d available", namespace, name, st.DesiredNumberScheduled, st.NumberAvailable)
	}
	return pod, nil
}

// gpuAllocatable checks the Node's allocatable of the GPU add-on's resource.
func gpuAllocatable(ctx context.Context, wl kubernetes.Interface, node string, want int64) error {
	n, err := wl.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	q := n.Status.Allocatable[gpuaddon.ResourceName]
	if q.Value() != want {
		return fmt.Errorf("node %s: %s allocatable %s, want %d", node, gpuaddon.ResourceName, q.String(), want)
	}
	return nil
}

// crashed reports a container of the Pod that exited, with the end of its log on the node.
func crashed(pod *corev1.Pod, machineDir string) error {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.RestartCount > 0 && cs.LastTerminationState.Terminated != nil {
			return fmt.Errorf("the container %s of %s exited (%s, code %d), restarted %d times; its log on the node:\n%s", cs.Name, pod.Name,
				cs.LastTerminationState.Terminated.Reason, cs.LastTerminationState.Terminated.ExitCode, cs.RestartCount, podLogs(machineDir, *pod))
		}
	}
	return nil
}

// removeCreatedHostPaths removes, at the end of the test, each of paths that does not exist
// now (a folder with what it then holds).
func removeCreatedHostPaths(t *testing.T, paths ...string) {
	t.Helper()
	var created []string
	for _, p := range paths {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			created = append(created, p)
		}
	}
	t.Cleanup(func() {
		for _, p := range created {
			if err := os.RemoveAll(p); err != nil {
				t.Error(err)
			}
		}
	})
}

// buildSRIOVAgentImage builds the agent and its CNI plugin into the add-on's image, tagged as
// the manager at each version names it.
func buildSRIOVAgentImage(t *testing.T, ctx context.Context, root string, versions ...string) []string {
	t.Helper()
	bin := filepath.Join(managerAddonsDir(root), "bin")
	if err := images.GoBuildStaticInto(ctx, root, bin, "github.com/capx-io/capx/cmd/capvco-sriov-agent", "github.com/capx-io/capx/cmd/capvco-sriov"); err != nil {
		t.Fatal(err)
	}
	spec := images.Spec{
		Files: []images.File{{Path: "/capvco-sriov-agent", Source: filepath.Join(bin, "capvco-sriov-agent"), Mode: 0o755},
			{Path: "/capvco-sriov", Source: filepath.Join(bin, "capvco-sriov"), Mode: 0o755}},
		Entrypoint: []string{"/capvco-sriov-agent"},
		User:       images.NonRootUser,
	}
	return writeVersionedImages(t, managerAddonsDir(root), sriovComponent, spec, versions...)
}

// buildStandinImage builds the stand-in device plugin into an image that runs as root, as
// NVIDIA's does (the kubelet's socket and folder are root's), cached by content.
func buildStandinImage(t *testing.T, ctx context.Context, root string) images.Built {
	t.Helper()
	bin := filepath.Join(managerAddonsDir(root), "bin", "standinplugin")
	if err := images.GoBuildStatic(ctx, root, standinPackage, bin); err != nil {
		t.Fatal(err)
	}
	b, err := images.WriteCached(standinRepo, images.Spec{
		Files:      []images.File{{Path: "/standinplugin", Source: bin, Mode: 0o755}},
		Entrypoint: []string{"/standinplugin"},
	}, managerAddonsDir(root))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
