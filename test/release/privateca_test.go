//go:build release

package release

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

// TestManagerPrivateCA runs the snapshot's manager image as a container runtime would: its own
// root file system (chroot), its user (65532) and environment, nothing of this machine's. The
// simulator is served over HTTPS with a certificate of a private CA. A VCOCluster whose
// credential Secret lacks caBundle reports the untrusted certificate and names the key; one
// whose Secret holds the CA gets its cloudspace: the released manager reports the problem and
// takes the fix. (That the image's own roots verify a public CA needs the internet: TestImages
// checks that the bundle is where Go looks for it.)
func TestManagerPrivateCA(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs the manager image in a chroot as user 65532, which needs root (CI runs as root)")
	}
	s := loadSnapshot(t)
	img := hostImage(t, s, "capx-manager")
	root := t.TempDir()
	unpack(t, img, root)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}

	sim, err := vcosim.New(vcosim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ca := vcotest.NewPrivateCA(t)
	base := ca.ServeTLS(t, sim)
	tok, err := sim.Token(vcosim.SeedClusterPrinc, 0)
	if err != nil {
		t.Fatal(err)
	}

	env, err := testenv.Start(testenv.Options{CAPI: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig, err := os.ReadFile(env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "tmp", "kubeconfig"), kubeconfig, 0o644); err != nil {
		t.Fatal(err)
	}
	startManager(t, root, cf.Config.Entrypoint, cf.Config.Env,
		"--providers=capvco", "--kubeconfig=/tmp/kubeconfig", "--health-addr=0", "--metrics-bind-address=0")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cluster := func(withCA bool) *capvcov1.VCOCluster {
		ns := env.NewNamespace(t)
		data := map[string][]byte{vco.SecretKeyURL: []byte(base + "/api/1"), vco.SecretKeyCustomer: []byte(vcosim.SeedCustomer),
			vco.SecretKeyJWT: []byte(tok)}
		if withCA {
			data[vco.SecretKeyCABundle] = ca.PEM
		}
		c := testenv.Cluster(ns, "c", "VCOCluster", "c")
		c.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"10.96.0.0/12"}
		vc := testenv.VCOCluster(ns, "c", "c", vcosim.SeedLocation, "vco-credentials")
		for _, o := range []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vco-credentials"}, Data: data}, c, vc} {
			create(ctx, t, env, o)
		}
		return vc
	}
	without, with := cluster(false), cluster(true)

	waitCluster(ctx, t, env, without, "a condition naming the untrusted certificate and caBundle", func(vc *capvcov1.VCOCluster) bool {
		for _, c := range vc.Status.Conditions {
			if c.Status != metav1.ConditionTrue && strings.Contains(c.Message, "certificate is not trusted") && strings.Contains(c.Message, `"caBundle"`) {
				t.Logf("without caBundle: %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
				return true
			}
		}
		return false
	})
	waitCluster(ctx, t, env, with, "its cloudspace", func(vc *capvcov1.VCOCluster) bool {
		return len(vc.Status.Cloudspaces) > 0 && vc.Status.Cloudspaces[0].ID != ""
	})
	if n := len(sim.Snapshot().Cloudspaces); n != 1 {
		t.Errorf("the simulator holds %d cloudspaces, want 1 (the cluster with the CA only)", n)
	}
}

// hostImage is this machine's image in a snapshot image's OCI layout (an index of one index).
func hostImage(t *testing.T, s *snapshot, name string) v1.Image {
	t.Helper()
	p, err := layout.FromPath(filepath.Join(s.dist, "images", name))
	if err != nil {
		t.Fatalf("%v: make release-snapshot writes it (hack/releaseimages)", err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil || len(tm.Manifests) != 1 {
		t.Fatalf("%s index.json: %v, %v", name, tm, err)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("%s has no image for linux/%s", name, runtime.GOARCH)
	return nil
}

// startManager runs the entrypoint chrooted into root as 65532:65532 with the image's
// environment only, and stops it when the test ends; a failed test shows its output.
func startManager(t *testing.T, root string, entrypoint, environ []string, args ...string) {
	t.Helper()
	if len(entrypoint) == 0 {
		t.Fatal("the image has no entrypoint")
	}
	out := &testenv.SyncBuffer{}
	// The child chroots before it executes, so Path is the entrypoint's path inside the image
	// (exec.Command would look it up on this machine).
	cmd := &exec.Cmd{Path: entrypoint[0], Args: append(append([]string{}, entrypoint...), args...), Env: environ}
	// t.TempDir is 0700: user 65532 must be able to enter the image's root.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s in the image's root: %v", entrypoint[0], err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			o := out.String()
			t.Logf("manager output (tail):\n%s", o[max(0, len(o)-4000):])
		}
	})
}

func create(ctx context.Context, t *testing.T, env *testenv.Env, o client.Object) {
	t.Helper()
	// CAPI's webhooks start with its manager, in the background of testenv.Start.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Create(ctx, o)
		if err != nil && strings.Contains(err.Error(), "connection refused") {
			return false, nil
		}
		return true, err
	})
	if err != nil {
		t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

func waitCluster(ctx context.Context, t *testing.T, env *testenv.Env, vc *capvcov1.VCOCluster, what string, ok func(*capvcov1.VCOCluster) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vc), vc); err != nil {
			return false, nil
		}
		return ok(vc), nil
	})
	if err != nil {
		var b strings.Builder
		for _, c := range vc.Status.Conditions {
			b.WriteString("  " + c.Type + "=" + string(c.Status) + " " + c.Reason + ": " + c.Message + "\n")
		}
		t.Fatalf("VCOCluster %s/%s: want %s: %v; conditions:\n%s", vc.Namespace, vc.Name, what, err, b.String())
	}
}
