package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/statekey"
)

// Kubelet plays the kubelet's part for the Pods of CAPTF Jobs on envtest, where no kubelet runs.
// For each Pod the real Job controller creates, it runs the Pod's main container as a local
// process: the container's command and arguments, its environment (envFrom Secrets included),
// its Secret and projected volumes materialised to files, and the fixed paths of the module
// contract mapped into a folder of its own. When the process ends it writes the Pod's status
// (exit code, termination message from the result file), so the real Job controller completes
// or fails the Job. A Pod deleted while its process runs gets SIGTERM, as from a kubelet.
//
// The process reaches the API server as the Pod's ServiceAccount, as in a cluster: a kubeconfig
// with a token the TokenRequest API issued for that account stands for the projected token, so
// RBAC decides what a module (and the runner) may do exactly as it would on a real cluster.
type Kubelet struct {
	env *Env
	// Runner is the manager binary, named "runner" so it runs as the CAPTF runner.
	Runner string
	// Tofu is the OpenTofu binary standing for the image's /captf/runtime.
	Tofu string
	// Module maps a module image to the folder holding its module.
	Module func(image string) (string, error)
	// Log receives every Pod's output, prefixed with its name.
	Log *SyncBuffer

	dir       string
	namespace string
	mu        sync.Mutex
	handled   map[string]*exec.Cmd
	wg        sync.WaitGroup
	started   int
}

// SyncBuffer is a goroutine-safe buffer for logs.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// StartKubelet builds the runner (the manager binary) and starts playing the kubelet's part
// until the test ends. The environment must run kube-controller-manager.
func (e *Env) StartKubelet(t testing.TB, module func(image string) (string, error)) *Kubelet {
	t.Helper()
	return e.StartKubeletIn(t, "", module)
}

// StartKubeletIn is StartKubelet for the Pods of one namespace only ("" for all), so tests
// running in parallel, each in its own namespace, each run only their own Pods.
func (e *Env) StartKubeletIn(t testing.TB, namespace string, module func(image string) (string, error)) *Kubelet {
	t.Helper()
	if e.kcm == nil {
		t.Fatal("testenv: StartKubelet needs Options{ControllerManager: true}")
	}
	k := &Kubelet{env: e, Module: module, Log: &SyncBuffer{}, handled: map[string]*exec.Cmd{}, dir: t.TempDir(), namespace: namespace}
	var err error
	if k.Runner, err = e.RunnerBinary(); err != nil {
		t.Fatal(err)
	}
	k.Tofu = filepath.Join(e.Root, "bin", "tofu")
	if _, err := os.Stat(k.Tofu); err != nil {
		t.Fatalf("testenv: %s not found: run `make toolchain` (it builds OpenTofu once per machine)", k.Tofu)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); k.loop(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		k.mu.Lock()
		for _, cmd := range k.handled {
			if cmd != nil && cmd.Process != nil {
				_ = cmd.Process.Kill()
			}
		}
		k.mu.Unlock()
		k.wg.Wait()
		if t.Failed() {
			t.Logf("runner pods' output:\n%s", k.Log.String())
		}
	})
	return k
}

var (
	runnerOnce sync.Once
	runnerPath string
	runnerErr  error
)

// RunnerBinary builds the manager once per test process into a file named "runner".
func (e *Env) RunnerBinary() (string, error) {
	runnerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "capx-runner-")
		if err != nil {
			runnerErr = err
			return
		}
		runnerPath = filepath.Join(dir, "runner")
		cmd := exec.Command("go", "build", "-o", runnerPath, "./cmd/manager")
		cmd.Dir = e.Root
		if out, err := cmd.CombinedOutput(); err != nil {
			runnerErr = fmt.Errorf("build the runner: %v\n%s", err, out)
		}
	})
	return runnerPath, runnerErr
}

// Started counts the Pods whose process was started.
func (k *Kubelet) Started() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.started
}

func (k *Kubelet) loop(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pods := &corev1.PodList{}
		if err := k.env.Client.List(ctx, pods, client.InNamespace(k.namespace), client.MatchingLabels{"captf.io/managed": "true"}); err != nil {
			continue
		}
		for i := range pods.Items {
			k.sync(ctx, &pods.Items[i])
		}
	}
}

// sync starts a new Pod's process, or stops the process of a Pod being deleted.
func (k *Kubelet) sync(ctx context.Context, pod *corev1.Pod) {
	key := pod.Namespace + "/" + pod.Name + "/" + string(pod.UID)
	k.mu.Lock()
	cmd, seen := k.handled[key]
	if !seen && pod.DeletionTimestamp == nil && (pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending) {
		k.handled[key] = nil
		k.started++
		k.wg.Add(1)
		k.mu.Unlock()
		go func() {
			defer k.wg.Done()
			k.run(ctx, pod.DeepCopy(), key)
		}()
		return
	}
	k.mu.Unlock()
	if pod.DeletionTimestamp != nil {
		if cmd != nil && cmd.Process != nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		} else if !seen || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			// Nothing runs: confirm the deletion, as a kubelet does.
			_ = k.env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))
		}
	}
}

// run runs a Pod's main container and reports its end.
func (k *Kubelet) run(ctx context.Context, pod *corev1.Pod, key string) {
	dir := filepath.Join(k.dir, pod.Name)
	out := &prefixWriter{prefix: pod.Name + ": ", w: k.Log}
	exitCode, message, err := k.runPod(ctx, pod, dir, key, out)
	if err != nil {
		fmt.Fprintf(out, "kubelet: %v\n", err)
		exitCode, message = 128, err.Error()
	}
	k.mu.Lock()
	k.handled[key] = nil
	k.mu.Unlock()
	k.finish(context.WithoutCancel(ctx), pod, exitCode, message)
}

func (k *Kubelet) runPod(ctx context.Context, pod *corev1.Pod, dir, key string, out *prefixWriter) (int, string, error) {
	c := findContainer(pod.Spec.Containers, "source")
	if c == nil {
		return 0, "", errors.New("no source container")
	}
	// A kubelet waits for a Pod's Secret volumes to exist before it starts the containers (the
	// per-run Secret is created just after its Job); so does this one, for a while.
	var mounts map[string]string
	var err error
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if mounts, err = k.materialise(ctx, pod, dir); err == nil || !apierrors.IsNotFound(errors.Unwrap(err)) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return 0, "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err != nil {
		return 0, "", err
	}
	module, err := k.Module(c.Image)
	if err != nil {
		return 0, "", err
	}
	// The runner expects the module at <workdir>/../module.
	if err := os.Symlink(module, filepath.Join(dir, "module")); err != nil {
		return 0, "", err
	}
	for _, d := range []string{"work", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return 0, "", err
		}
	}
	kubeconfig, err := k.serviceAccountKubeconfig(ctx, pod)
	if err != nil {
		return 0, "", err
	}
	result := filepath.Join(dir, "result")
	args := rewriteArgs(c.Args, kubeconfig)
	args = append(args, "--bin="+k.Tofu, "--module="+filepath.Join(dir, "module"),
		"--workdir="+filepath.Join(dir, "work"), "--result-file="+result)
	for _, m := range []string{"config", "credentials"} {
		if p, ok := mounts[m]; ok {
			args = append(args, "--"+m+"="+p)
		}
	}
	// The state key token's mount, and OpenTofu's key provider (the runner at its local path).
	if p, ok := mounts[path.Dir(statekey.TokenPath)]; ok {
		args = append(args, "--state-key-token="+filepath.Join(p, path.Base(statekey.TokenPath)), "--state-key-helper="+k.Runner)
	}
	env, err := k.environ(ctx, pod, c, dir, kubeconfig)
	if err != nil {
		return 0, "", err
	}
	cmd := exec.Command(k.Runner, append(c.Command[1:], args...)...)
	cmd.Env, cmd.Stdout, cmd.Stderr, cmd.Dir = env, out, out, dir
	if err := k.markRunning(ctx, pod); err != nil {
		return 0, "", err
	}
	if err := cmd.Start(); err != nil {
		return 0, "", err
	}
	k.mu.Lock()
	k.handled[key] = cmd
	k.mu.Unlock()
	_ = cmd.Wait()
	msg, _ := os.ReadFile(result)
	return cmd.ProcessState.ExitCode(), string(msg), nil
}

// materialise writes the Pod's Secret and projected volumes to files, and returns where each
// contract mount point went.
func (k *Kubelet) materialise(ctx context.Context, pod *corev1.Pod, dir string) (map[string]string, error) {
	c := findContainer(pod.Spec.Containers, "source")
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		v := volumes[m.Name]
		target := filepath.Join(dir, "mounts", m.Name)
		var err error
		switch {
		case v.Secret != nil:
			err = k.writeSecret(ctx, pod.Namespace, v.Secret.SecretName, v.Secret.Items, target, ptr.Deref(v.Secret.Optional, false))
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				switch {
				case src.Secret != nil:
					err = k.writeSecret(ctx, pod.Namespace, src.Secret.Name, src.Secret.Items, target, ptr.Deref(src.Secret.Optional, false))
				case src.ServiceAccountToken != nil:
					err = k.writeBoundToken(ctx, pod, src.ServiceAccountToken, target)
				}
				if err != nil {
					break
				}
			}
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		mounts[mountKey(m.MountPath)] = target
	}
	return mounts, nil
}

// mountKey names a contract mount point by the runner flag that points at it.
func mountKey(path string) string {
	switch path {
	case "/captf/config":
		return "config"
	case "/var/run/captf/credentials":
		return "credentials"
	case "/captf/plan-key":
		return "plan-key"
	}
	return path
}

// writeBoundToken writes a projected ServiceAccount token as a kubelet does: issued by the
// TokenRequest API for the Pod's account, with the projection's audience, bound to the Pod.
func (k *Kubelet) writeBoundToken(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection, target string) error {
	account := pod.Spec.ServiceAccountName
	if account == "" {
		account = "default"
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: account}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(ptr.Deref(src.ExpirationSeconds, 3600)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	if err := k.env.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return fmt.Errorf("projected token of ServiceAccount %s/%s: %w", pod.Namespace, account, err)
	}
	p := filepath.Join(target, src.Path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(req.Status.Token), 0o600)
}

func (k *Kubelet) writeSecret(ctx context.Context, ns, name string, items []corev1.KeyToPath, target string, optional bool) error {
	s := &corev1.Secret{}
	if err := k.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) && optional {
			return nil
		}
		return fmt.Errorf("volume Secret %s: %w", name, err)
	}
	if len(items) == 0 {
		for key := range s.Data {
			items = append(items, corev1.KeyToPath{Key: key, Path: key})
		}
	}
	for _, it := range items {
		p := filepath.Join(target, it.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, s.Data[it.Key], 0o600); err != nil {
			return err
		}
	}
	return nil
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the Pod's ServiceAccount
// with a token from the TokenRequest API, and returns its path. The path is the account's, not
// the Pod's: a saved plan records the backend's configuration, so the approved apply's Pod reads
// the kubeconfig the plan's Pod was given (in a cluster both use the in-cluster config). Each Pod
// writes a fresh token there (atomically: Pods of one account may start together); tokens are
// bound to no Pod, so one Pod's end does not invalidate another's.
func (k *Kubelet) serviceAccountKubeconfig(ctx context.Context, pod *corev1.Pod) (string, error) {
	account := pod.Spec.ServiceAccountName
	if account == "" {
		account = "default"
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: account}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := k.env.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", fmt.Errorf("a token for ServiceAccount %s/%s: %w", pod.Namespace, account, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: k.env.Config.Host, CertificateAuthorityData: k.env.Config.CAData}
	cfg.AuthInfos[account] = &clientcmdapi.AuthInfo{Token: req.Status.Token}
	cfg.Contexts["pod"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: account, Namespace: pod.Namespace}
	cfg.CurrentContext = "pod"
	dir := filepath.Join(k.dir, "serviceaccounts", pod.Namespace, account)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "kubeconfig-*")
	if err != nil {
		return "", err
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.Rename(tmp.Name(), path)
}

// rewriteArgs points the backend at the test API server instead of the in-cluster config.
func rewriteArgs(args []string, kubeconfig string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		if a == "--backend-config=in_cluster_config=true" {
			a = "--backend-config=config_path=" + kubeconfig
		}
		out = append(out, a)
	}
	return out
}

// environ is the container's environment: its env values and envFrom Secrets, with HOME and
// TMPDIR in the Pod's folder and PATH kept for the runtime.
func (k *Kubelet) environ(ctx context.Context, pod *corev1.Pod, c *corev1.Container, dir, kubeconfig string) ([]string, error) {
	// KUBECONFIG stands for the Pod's ServiceAccount: the runner posts its progress Events with it.
	env := []string{"PATH=" + os.Getenv("PATH"), "KUBECONFIG=" + kubeconfig}
	for _, from := range c.EnvFrom {
		if from.SecretRef == nil {
			continue
		}
		s := &corev1.Secret{}
		if err := k.env.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: from.SecretRef.Name}, s); err != nil {
			if apierrors.IsNotFound(err) && ptr.Deref(from.SecretRef.Optional, false) {
				continue
			}
			return nil, fmt.Errorf("envFrom Secret %s: %w", from.SecretRef.Name, err)
		}
		for key, v := range s.Data {
			env = append(env, from.Prefix+key+"="+string(v))
		}
	}
	for _, e := range c.Env {
		v := e.Value
		switch e.Name {
		case "HOME":
			v = filepath.Join(dir, "work")
		case "TMPDIR":
			v = filepath.Join(dir, "tmp")
		}
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}

func (k *Kubelet) markRunning(ctx context.Context, pod *corev1.Pod) error {
	now := metav1.Now()
	return k.updateStatus(ctx, pod, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.StartTime = &now
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "source", Image: findContainer(p.Spec.Containers, "source").Image, ImageID: "testenv://" + findContainer(p.Spec.Containers, "source").Image,
			Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}}
	})
}

// finish writes the Pod's final status, as a kubelet does when its container ends.
func (k *Kubelet) finish(ctx context.Context, pod *corev1.Pod, exitCode int, message string) {
	now := metav1.Now()
	phase, reason := corev1.PodSucceeded, "Completed"
	if exitCode != 0 {
		phase, reason = corev1.PodFailed, "Error"
	}
	err := k.updateStatus(ctx, pod, func(p *corev1.Pod) {
		p.Status.Phase = phase
		src := findContainer(p.Spec.Containers, "source")
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "source", Image: src.Image, ImageID: "testenv://" + src.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: int32(exitCode), Reason: reason, Message: message, FinishedAt: now,
			}},
		}}
	})
	if err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(k.Log, "%s: kubelet: write status: %v\n", pod.Name, err)
	}
}

func (k *Kubelet) updateStatus(ctx context.Context, pod *corev1.Pod, mutate func(*corev1.Pod)) error {
	for range 20 {
		cur := &corev1.Pod{}
		if err := k.env.Client.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
			return err
		}
		mutate(cur)
		err := k.env.Client.Status().Update(ctx, cur)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return errors.New("pod status update kept conflicting")
}

func findContainer(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

type prefixWriter struct {
	prefix string
	w      *SyncBuffer
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		_, _ = p.w.Write(append([]byte(p.prefix), p.buf[:i+1]...))
		p.buf = p.buf[i+1:]
	}
}
