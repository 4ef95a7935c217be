//go:build e2e

// The tests in this file start real clusters: they need root, hack/install-deps.sh and
// hack/toolchain.sh kube etcd tofu, and take a minute or two. They only build with -tags e2e
// (the default `go test ./...` skips the file) and never skip themselves: run with the tag on a
// machine without the prerequisites, they fail and say what is missing.
//
//	go test -tags e2e -v -timeout 20m ./test/localcluster/
package localcluster_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/capx-io/capx/test/images"
	"github.com/capx-io/capx/test/localcluster"
)

// upForTest starts a cluster and registers its teardown, which must leave nothing behind.
func upForTest(t *testing.T, ctx context.Context, name string) (*localcluster.Cluster, kubernetes.Interface) {
	t.Helper()
	o := localcluster.Options{Name: name, Progress: testWriter{t}}
	start := time.Now()
	c, err := localcluster.Up(ctx, o)
	if err != nil {
		t.Fatalf("up %s: %v", name, err)
	}
	t.Logf("TIMING up %s: %.1fs", name, time.Since(start).Seconds())
	t.Cleanup(func() { downAndCheck(t, c, o) })
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, client
}

func downAndCheck(t *testing.T, c *localcluster.Cluster, o localcluster.Options) {
	t.Helper()
	start := time.Now()
	if err := c.Down(context.Background()); err != nil {
		t.Errorf("down %s: %v", c.Name(), err)
	}
	t.Logf("TIMING down %s: %.1fs", c.Name(), time.Since(start).Seconds())
	left, err := localcluster.Leftovers(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("cluster %s left behind: %s", c.Name(), strings.Join(left, "; "))
	}
	if _, err := os.Stat("/run/netns/" + c.NetNS()); !os.IsNotExist(err) {
		t.Errorf("network namespace %s still exists (%v)", c.NetNS(), err)
	}
	entries, _ := os.ReadDir(c.Dir())
	for _, e := range entries {
		if e.Name() != "logs" {
			t.Errorf("cluster folder still holds %s", e.Name())
		}
	}
}

// TestSmoke proves the cluster runs real work: a Job whose pod runs `tofu init` and
// `tofu apply` of an offline module with the kubernetes backend, reaching the API server through
// the kubernetes Service with its ServiceAccount token; the state Secret and lock Lease appear.
func TestSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, client := upForTest(t, ctx, "smoke")

	// The module carries its own partial backend block because no CAPTF runner exists here to add
	// it; the image is otherwise a contract v1alpha1 module image.
	dir := t.TempDir()
	module := filepath.Join(dir, "module")
	must(t, os.MkdirAll(module, 0o755))
	must(t, os.WriteFile(filepath.Join(module, "main.tf"), []byte(`terraform {
  backend "kubernetes" {}
}

resource "terraform_data" "smoke" {
  input = "hello from the local cluster"
}

output "greeting" {
  value = terraform_data.smoke.output
}
`), 0o644))
	tofu := filepath.Join(repoRoot(t), "bin", "tofu")
	img := images.TofuModule{Ref: "capx.local/smoke-module:1", ModuleDir: module, Runtime: tofu, Role: "cluster"}
	tarPath := filepath.Join(dir, "module.tar")
	start := time.Now()
	must(t, img.WriteTarball(tarPath))
	must(t, c.LoadImage(ctx, tarPath))
	t.Logf("TIMING module image build+load: %.1fs", time.Since(start).Seconds())

	const ns, suffix = "smoke", "smoke"
	createRBAC(t, ctx, client, ns)
	start = time.Now()
	job := tofuJob(ns, img.Ref, suffix)
	if _, err := client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, ctx, client, ns, job.Name)
	t.Logf("TIMING tofu job: %.1fs", time.Since(start).Seconds())

	secret, err := client.CoreV1().Secrets(ns).Get(ctx, "tfstate-default-"+suffix, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("state Secret: %v", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(secret.Data["tfstate"]))
	if err != nil {
		t.Fatalf("state is not gzip: %v", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 1<<20))
	must(t, err)
	var state struct {
		Version int `json:"version"`
		Outputs map[string]struct {
			Value any `json:"value"`
		} `json:"outputs"`
	}
	must(t, json.Unmarshal(raw, &state))
	if state.Version != 4 || state.Outputs["greeting"].Value != "hello from the local cluster" {
		t.Errorf("state: version %d, outputs %v", state.Version, state.Outputs)
	}
	if _, err := client.CoordinationV1().Leases(ns).Get(ctx, "lock-tfstate-default-"+suffix, metav1.GetOptions{}); err != nil {
		t.Errorf("lock Lease: %v", err)
	}
}

// TestTwoClusters runs two clusters side by side, as clusterctl move tests need: distinct
// namespaces, ports and kubeconfigs, each seeing only its own node.
func TestTwoClusters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	a, ca := upForTest(t, ctx, "pair-a")
	b, cb := upForTest(t, ctx, "pair-b")
	if a.Kubeconfig() == b.Kubeconfig() || a.APIServerURL() == b.APIServerURL() || a.NetNS() == b.NetNS() {
		t.Fatalf("clusters share a kubeconfig, port or namespace: %s %s %s / %s %s %s",
			a.Kubeconfig(), a.APIServerURL(), a.NetNS(), b.Kubeconfig(), b.APIServerURL(), b.NetNS())
	}
	for _, tc := range []struct {
		c      *localcluster.Cluster
		client kubernetes.Interface
	}{{a, ca}, {b, cb}} {
		nodes, err := tc.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes.Items) != 1 || nodes.Items[0].Name != tc.c.NodeName() {
			t.Errorf("cluster %s sees nodes %v, want only %s", tc.c.Name(), nodeNames(nodes.Items), tc.c.NodeName())
		}
		if s := tc.c.Status(ctx); !s.Up() {
			t.Errorf("cluster %s status not up: %+v", tc.c.Name(), s)
		}
	}
}

func createRBAC(t *testing.T, ctx context.Context, client kubernetes.Interface, ns string) {
	t.Helper()
	objs := []func() error{
		func() error {
			_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tofu"}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: "tofu-state"},
				Rules: []rbacv1.PolicyRule{
					{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
					{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
				},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "tofu-state"},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tofu-state"},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tofu", Namespace: ns}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objs {
		must(t, create())
	}
}

// tofuJob runs `tofu init` in an init container and `tofu apply` in the main one (the image has
// no shell for `&&`); they share the data dir through an emptyDir. Locked down as CAPTF's Jobs
// are: non-root 65532, read-only root filesystem, no capabilities.
func tofuJob(ns, image, suffix string) *batchv1.Job {
	zero, deadline := int32(0), int64(300)
	yes, no := true, false
	uid := int64(65532)
	sc := &corev1.SecurityContext{
		ReadOnlyRootFilesystem:   &yes,
		AllowPrivilegeEscalation: &no,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	env := []corev1.EnvVar{
		{Name: "TF_DATA_DIR", Value: "/captf/work/.terraform"},
		{Name: "HOME", Value: "/captf/work"},
		{Name: "TMPDIR", Value: "/tmp"},
	}
	mounts := []corev1.VolumeMount{{Name: "work", MountPath: "/captf/work"}, {Name: "tmp", MountPath: "/tmp"}}
	container := func(name string, args ...string) corev1.Container {
		return corev1.Container{
			Name: name, Image: image, ImagePullPolicy: corev1.PullNever, Args: args,
			Env: env, VolumeMounts: mounts, SecurityContext: sc,
		}
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "tofu-apply", Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit:          &zero,
			ActiveDeadlineSeconds: &deadline,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				ServiceAccountName: "tofu",
				RestartPolicy:      corev1.RestartPolicyNever,
				SecurityContext:    &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid, RunAsNonRoot: &yes},
				InitContainers: []corev1.Container{container("init", "init", "-input=false", "-no-color",
					"-backend-config=secret_suffix="+suffix, "-backend-config=namespace="+ns, "-backend-config=in_cluster_config=true")},
				Containers: []corev1.Container{container("apply", "apply", "-input=false", "-no-color", "-auto-approve")},
				Volumes: []corev1.Volume{
					{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				},
			}},
		},
	}
}

// waitJob waits for the Job to complete; on failure it prints the pods' container logs.
func waitJob(t *testing.T, ctx context.Context, client kubernetes.Interface, ns, name string) {
	t.Helper()
	for {
		job, err := client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cond := range job.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				continue
			}
			switch cond.Type {
			case batchv1.JobComplete:
				return
			case batchv1.JobFailed:
				t.Fatalf("job %s failed: %s\n%s", name, cond.Message, podLogs(ctx, client, ns, name))
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %s: %v\n%s", name, ctx.Err(), podLogs(context.Background(), client, ns, name))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func podLogs(ctx context.Context, client kubernetes.Interface, ns, job string) string {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s phase %s\n", p.Name, p.Status.Phase)
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			out, err := client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
			fmt.Fprintf(&b, "--- %s (%v)\n%s\n", c.Name, err, out)
		}
	}
	return b.String()
}

func nodeNames(nodes []corev1.Node) []string {
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	return names
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := localcluster.RepoRoot()
	must(t, err)
	return root
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testWriter sends the harness' progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
