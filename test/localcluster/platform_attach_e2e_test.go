//go:build e2e

package localcluster_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/capx-io/capx/test/images"
	"github.com/capx-io/capx/test/localcluster"
)

// TestPlatformAttach: a management cluster brought up with the platform's routes and attached
// to it reaches a platform service from a pod (what the managers' pods do with the platform's
// API and load balancers), its isolation check now covering the platform's namespaces; a pod of
// a cluster that was not attached gets no answer; and both teardowns leave nothing.
func TestPlatformAttach(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const name, service = "pattach", "203.0.113.5:8080"
	_ = localcluster.DownPlatform(ctx, localcluster.PlatformOptions{Name: name})
	p, err := localcluster.UpPlatform(ctx, localcluster.PlatformOptions{Name: name, Public: []string{"203.0.113.0/24"},
		Private: []string{"192.168.110.0/24"}, Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Down(context.Background()); err != nil {
			t.Error(err)
		}
		if left, _ := localcluster.Leftovers(localcluster.Options{Name: name}); len(left) > 0 {
			t.Errorf("platform left behind: %v", left)
		}
	})
	ln, err := p.Listen(service)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "the platform answers")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	o := localcluster.Options{Name: "pmgmt", PodRoutes: p.Routes(), Progress: testWriter{t}}
	c, err := localcluster.Up(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { downAndCheck(t, c, o) })
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	img := httpGetImage(t, ctx)
	if err := c.LoadImage(ctx, img.Tarball); err != nil {
		t.Fatal(err)
	}
	probe := func(name string) (corev1.PodPhase, string) {
		t.Helper()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "get", Image: img.Ref, ImagePullPolicy: corev1.PullNever,
				Args: []string{"http://" + service + "/"}}},
		}}
		if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			got, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err == nil && (got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed) {
				logs, _ := client.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
				return got.Status.Phase, strings.TrimSpace(string(logs))
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %s did not finish: %v %v", name, got.Status, err)
			}
			time.Sleep(time.Second)
		}
	}
	if phase, out := probe("before"); phase != corev1.PodFailed {
		t.Errorf("before the attach a pod reached the platform: %s %q", phase, out)
	}
	if err := p.Attach(ctx, c); err != nil {
		t.Fatal(err)
	}
	if phase, out := probe("after"); phase != corev1.PodSucceeded || !strings.Contains(out, "the platform answers") {
		t.Errorf("after the attach: %s %q, want the platform's answer", phase, out)
	}
	if st := c.Status(ctx); st.Isolation != "ok" {
		t.Errorf("the attached cluster's status says it is not isolated: %+v", st)
	}
}

func httpGetImage(t *testing.T, ctx context.Context) images.Built {
	t.Helper()
	root := repoRoot(t)
	// A folder of its own: the e2e suites' images (test/images.BuildLocal) stay as they are.
	dir := filepath.Join(root, "_artifacts", "images-platform")
	bin := filepath.Join(dir, "bin", "httpget")
	if err := images.GoBuildStatic(ctx, root, "github.com/capx-io/capx/test/images/httpget", bin); err != nil {
		t.Fatal(err)
	}
	b, err := images.WriteCached(images.HTTPGetRepository, images.Spec{
		Files:      []images.File{{Path: "/httpget", Source: bin, Mode: 0o755}},
		Entrypoint: []string{"/httpget"},
		User:       images.NonRootUser,
	}, dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
