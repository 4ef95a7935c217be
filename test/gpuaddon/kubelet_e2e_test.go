//go:build e2e

// This test starts a real local cluster (kubelet, containerd, API server): it needs root,
// hack/install-deps.sh and hack/toolchain.sh kube etcd, and builds only with -tags e2e:
//
//	go test -tags e2e -v -timeout 20m ./test/gpuaddon/
//
// make e2e runs it with the other suites.
package gpuaddon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/capx-io/capx/internal/capvco/gpuaddon"
	"github.com/capx-io/capx/internal/capvco/gpuaddon/standin"
	"github.com/capx-io/capx/test/images"
	"github.com/capx-io/capx/test/localcluster"
)

type progress struct{ t *testing.T }

func (p progress) Write(b []byte) (int, error) {
	p.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// TestRealKubelet registers the stand-in device plugin (internal/capvco/gpuaddon/standin) with a real kubelet under the add-on's resource name:
// the node's capacity shows the devices, a Pod asking for one runs with the device the kubelet
// allocated in NVIDIA_VISIBLE_DEVICES (read from the container's OCI spec in containerd), a
// Pod asking for more than is left stays unschedulable, and a stopped plugin's devices leave
// the node's allocatable. What NVIDIA's own plugin does on a GPU is not shown here.
func TestRealKubelet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	o := localcluster.Options{Name: "gpustandin", Progress: progress{t}}
	c, err := localcluster.Up(ctx, o)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Down(context.Background()); err != nil {
			t.Errorf("down: %v", err)
		}
	})
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	// The kubelet's --root-dir is the cluster folder's kubelet/. Its device manager's own
	// socket is the host's fixed /var/lib/kubelet/device-plugins, which every local cluster on
	// this host shares, so the stand-in registers through this kubelet's plugin watcher.
	p, err := standin.StartWatched(filepath.Join(c.Dir(), "kubelet", "plugins_registry"), gpuaddon.ResourceName, 2)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			p.Stop()
		}
	})
	waitAllocatable(t, ctx, client, c.NodeName(), 2)
	if ok, failure, told := p.Registration(); !told || !ok {
		t.Errorf("the kubelet's registration status: registered=%v error=%q (told: %v)", ok, failure, told)
	}

	ns := "gpu"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one, err := client.CoreV1().Pods(ns).Create(ctx, gpuPod("one", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running := waitPod(t, ctx, client, ns, one.Name, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	alloc := p.Allocated()
	if len(alloc) != 1 || len(alloc[0]) != 1 || !strings.HasPrefix(alloc[0][0], "standin-gpu-") {
		t.Fatalf("the kubelet allocated %v, want one stand-in device", alloc)
	}
	if env := containerEnv(t, ctx, c.ContainerdAddress(), running.Status.ContainerStatuses[0].ContainerID); !slices.Contains(env, "NVIDIA_VISIBLE_DEVICES="+alloc[0][0]) {
		t.Errorf("the container's environment %v lacks NVIDIA_VISIBLE_DEVICES=%s", env, alloc[0][0])
	}

	two, err := client.CoreV1().Pods(ns).Create(ctx, gpuPod("two", 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitPod(t, ctx, client, ns, two.Name, func(p *corev1.Pod) bool {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && strings.Contains(cond.Message, "Insufficient "+gpuaddon.ResourceName) {
				return true
			}
		}
		return false
	})

	p.Stop()
	stopped = true
	waitAllocatable(t, ctx, client, c.NodeName(), 0)
	// Down deletes the Pods through the API and waits for the kubelet to stop them.
}

func gpuPod(name string, gpus int64) *corev1.Pod {
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: images.PauseRef, ImagePullPolicy: corev1.PullNever,
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{gpuaddon.ResourceName: q}},
		}}},
	}
}

func waitAllocatable(t *testing.T, ctx context.Context, client kubernetes.Interface, node string, want int64) {
	t.Helper()
	var last string
	err := poll(ctx, 2*time.Minute, func() (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q := n.Status.Allocatable[gpuaddon.ResourceName]
		last = fmt.Sprintf("capacity %v allocatable %v", n.Status.Capacity[gpuaddon.ResourceName], q.String())
		return q.Value() == want, nil
	})
	if err != nil {
		t.Fatalf("node %s %s allocatable never became %d (%s): %v", node, gpuaddon.ResourceName, want, last, err)
	}
}

func waitPod(t *testing.T, ctx context.Context, client kubernetes.Interface, ns, name string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := poll(ctx, 3*time.Minute, func() (bool, error) {
		var err error
		pod, err = client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && done(pod), err
	})
	if err != nil {
		t.Fatalf("pod %s/%s: %v; status %+v", ns, name, err, pod.Status)
	}
	return pod
}

func poll(ctx context.Context, timeout time.Duration, check func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := check()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}

// containerEnv is the environment containerd created the container with (its OCI spec).
func containerEnv(t *testing.T, ctx context.Context, address, containerID string) []string {
	t.Helper()
	id := strings.TrimPrefix(containerID, "containerd://")
	out, err := exec.CommandContext(ctx, "ctr", "--address", address, "--namespace", "k8s.io", "containers", "info", id).Output()
	if err != nil {
		t.Fatalf("ctr containers info %s: %v", id, err)
	}
	var info struct {
		Spec struct {
			Process struct {
				Env []string `json:"env"`
			} `json:"process"`
		} `json:"Spec"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("ctr containers info %s: %v", id, err)
	}
	return info.Spec.Process.Env
}
