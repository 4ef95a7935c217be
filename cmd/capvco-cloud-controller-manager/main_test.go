package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/capx-io/capx/internal/capvco/ccm"
	"github.com/capx-io/capx/internal/capvco/ccm/config"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, testenv.Options{}, &env)) }

// TestCommand runs the command as the binary does (flags, the library's serving and
// controllers, the cloud-config and credential files) and sees it initialise a Node. The
// simulator is served over HTTPS with a certificate of a private CA, as a whitesky.cloud behind
// a company CA is: the credential's caBundle file (the key the manager reads, copied by the
// add-on delivery) is what the CCM trusts it by, and without it the CCM's platform calls fail
// naming the key.
func TestCommand(t *testing.T) {
	sim, err := vcosim.New(vcosim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ca := vcotest.NewPrivateCA(t)
	apiURL := ca.ServeTLS(t, sim) + "/api/1"
	tok, err := sim.Token(vcosim.SeedClusterPrinc, 0)
	if err != nil {
		t.Fatal(err)
	}
	api, err := vco.New(vco.Credentials{URL: apiURL, Customer: vcosim.SeedCustomer, JWT: tok, CABundle: ca.PEM}, vco.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cs, _, err := api.EnsureCloudspace(ctx, vco.CreateCloudspaceRequest{Name: names.Cloudspace("team-a", "cmd", names.PrimarySite), Location: vcosim.SeedLocation})
	if err != nil {
		t.Fatal(err)
	}
	img, err := api.FindImage(ctx, vcosim.SeedLocation, vcosim.SeedImageName)
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := api.EnsureVM(ctx, cs.ID, vco.CreateVMRequest{Name: "cmd-cp-0", Hostname: "cmd-cp-0", VCPUs: 2, MemoryMiB: 2048, ImageID: img.ID})
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	creds := vcotest.CredentialsDir(t, filepath.Join(dir, "credentials"), apiURL, tok)
	cloudConfig := filepath.Join(dir, "cloud-config.yaml")
	if err := os.WriteFile(cloudConfig, []byte("credentialsDir: "+creds+"\ncluster: {namespace: team-a, name: cmd}\nsites: [{name: primary, location: "+vcosim.SeedLocation+"}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Without the CA the cloud the command builds cannot look the Node's VM up, and says why.
	cfg, err := config.Load(cloudConfig)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cmd-cp-0"}}
	_, err = ccm.New(cfg, ccm.FromCredentials(cfg, vco.NewFactory(cfg.Platform.ClientOptions())), nil).InstanceMetadata(ctx, node)
	if !errors.Is(err, vco.ErrUntrustedCertificate) || !strings.Contains(err.Error(), `"caBundle"`) {
		t.Fatalf("without caBundle: %v; want the untrusted certificate, naming the caBundle key", err)
	}
	t.Logf("without caBundle: %v", err)
	if err := os.WriteFile(filepath.Join(creds, vco.SecretKeyCABundle), ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	cmd, err := ccm.NewCommand(stop)
	if err != nil {
		t.Fatal(err)
	}
	cmd.SetArgs([]string{"--kubeconfig=" + env.KubeconfigPath, "--cloud-config=" + cloudConfig, "--leader-elect=false",
		"--secure-port=0", "--node-monitor-period=1s"})
	done := make(chan error, 1)
	go func() { done <- cmd.Execute() }()
	t.Cleanup(func() {
		close(stop)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the command did not stop")
		}
	})

	kube := kubernetes.NewForConfigOrDie(env.Config)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cmd-cp-0"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}}
	if _, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := names.ProviderID(vcosim.SeedLocation, v.ID)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("the command ended: %v", err)
		default:
		}
		got, err := kube.CoreV1().Nodes().Get(ctx, "cmd-cp-0", metav1.GetOptions{})
		if err == nil && got.Spec.ProviderID == want && !tainted(got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Node was not initialised: providerID %q, taints %v", got.Spec.ProviderID, got.Spec.Taints)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// tainted reports the uninitialised taint (the API server adds not-ready to a Node without a
// Ready condition; that one is the kubelet's business).
func tainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return true
		}
	}
	return false
}
