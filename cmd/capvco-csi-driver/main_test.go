package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capx-io/capx/internal/capvco/csi"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

// TestControllerPrivateCA starts the controller as `capvco-csi-driver controller --config`
// does (csi.BuildController: the config, the credential files, the start-up check of the
// location's disks) against the simulator served over HTTPS with a certificate of a private CA.
// Without the credential's caBundle file it stops with the untrusted certificate, naming the
// key; with the CA it starts.
func TestControllerPrivateCA(t *testing.T) {
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
	dir := t.TempDir()
	creds := vcotest.CredentialsDir(t, filepath.Join(dir, "credentials"), apiURL, tok)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("credentialsDir: "+creds+"\ncluster: {namespace: team-a, name: c}\nsites: [{name: primary, location: "+
		vcosim.SeedLocation+"}]\nencryption: {vaultMode: none}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	_, err = csi.BuildController(ctx, cfg)
	if !errors.Is(err, vco.ErrUntrustedCertificate) || !strings.Contains(err.Error(), `"caBundle"`) {
		t.Fatalf("without caBundle: %v; want the untrusted certificate, naming the caBundle key", err)
	}
	t.Logf("without caBundle: %v", err)

	if err := os.WriteFile(filepath.Join(creds, vco.SecretKeyCABundle), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := csi.BuildController(ctx, cfg); err == nil || !strings.Contains(err.Error(), `"caBundle" holds no PEM certificate`) {
		t.Fatalf("with a caBundle that is no certificate: %v; want a refusal naming the key", err)
	}

	if err := os.WriteFile(filepath.Join(creds, vco.SecretKeyCABundle), ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := csi.BuildController(ctx, cfg); err != nil {
		t.Fatalf("with caBundle: %v", err)
	}
}
