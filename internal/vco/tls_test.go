package vco_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

// TestPrivateCA: a simulator served over HTTPS with a certificate of a private CA is refused
// with ErrUntrustedCertificate, at once and naming the caBundle key, until the credential
// Secret's caBundle holds that CA; then both the API and the IAM (client credentials) answer.
func TestPrivateCA(t *testing.T) {
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
	id, secret, err := sim.ClientSecret(vcosim.SeedClusterPrinc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	secretData := func(extra map[string]string) map[string][]byte {
		d := map[string][]byte{vco.SecretKeyURL: []byte(base + "/api/1"), vco.SecretKeyCustomer: []byte(vcosim.SeedCustomer)}
		for k, v := range extra {
			d[k] = []byte(v)
		}
		return d
	}
	client := func(t *testing.T, data map[string][]byte) *vco.Client {
		t.Helper()
		creds, err := vco.CredentialsFromSecret(data)
		if err != nil {
			t.Fatal(err)
		}
		c, err := vco.New(creds, vco.Options{MaxAttempts: 5, BaseBackoff: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	jwt := map[string]string{vco.SecretKeyJWT: tok}
	clientCreds := map[string]string{vco.SecretKeyClientID: id, vco.SecretKeyClientSecret: secret, vco.SecretKeyIAMURL: base + "/iam"}

	t.Run("without the CA", func(t *testing.T) {
		for name, extra := range map[string]map[string]string{"API": jwt, "IAM": clientCreds} {
			// A retry would sleep BaseBackoff (an hour): returning at all shows there was none.
			_, err := client(t, secretData(extra)).ListLocations(ctx)
			if !errors.Is(err, vco.ErrUntrustedCertificate) || !strings.Contains(err.Error(), `"caBundle"`) || vco.IsTransient(err) || errors.Is(err, vco.ErrUnauthorized) {
				t.Errorf("%s: %v; want ErrUntrustedCertificate naming caBundle, neither transient nor unauthorized", name, err)
			}
			t.Logf("%s: %v", name, err)
		}
	})
	t.Run("with the CA", func(t *testing.T) {
		for name, extra := range map[string]map[string]string{"API": jwt, "IAM": clientCreds} {
			with := map[string]string{vco.SecretKeyCABundle: string(ca.PEM)}
			for k, v := range extra {
				with[k] = v
			}
			if _, err := client(t, secretData(with)).ListLocations(ctx); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	})
	t.Run("another CA", func(t *testing.T) {
		other := vcotest.NewPrivateCA(t)
		_, err := client(t, secretData(map[string]string{vco.SecretKeyJWT: tok, vco.SecretKeyCABundle: string(other.PEM)})).ListLocations(ctx)
		if !errors.Is(err, vco.ErrUntrustedCertificate) {
			t.Errorf("a bundle of another CA: %v, want ErrUntrustedCertificate", err)
		}
	})
	t.Run("one credential's CA is not another's", func(t *testing.T) {
		f := vco.NewFactory(vco.Options{MaxAttempts: 1})
		withCA, err := vco.CredentialsFromSecret(secretData(map[string]string{vco.SecretKeyJWT: tok, vco.SecretKeyCABundle: string(ca.PEM)}))
		if err != nil {
			t.Fatal(err)
		}
		without := withCA
		without.CABundle = nil
		a, err := f.Client(withCA)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.ListLocations(ctx); err != nil {
			t.Fatal(err)
		}
		b, err := f.Client(without)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.ListLocations(ctx); !errors.Is(err, vco.ErrUntrustedCertificate) {
			t.Errorf("the same URL and token without the bundle: %v, want ErrUntrustedCertificate", err)
		}
	})
}

func TestCABundleRefused(t *testing.T) {
	key := "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIA==\n-----END EC PRIVATE KEY-----\n"
	for name, bundle := range map[string]string{
		"not PEM":       "just text",
		"a private key": key,
		"a bad cert":    "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
	} {
		_, err := vco.CredentialsFromSecret(map[string][]byte{vco.SecretKeyURL: []byte("https://try.whitesky.cloud/api/1"),
			vco.SecretKeyCustomer: []byte("c"), vco.SecretKeyJWT: []byte("x"), vco.SecretKeyCABundle: []byte(bundle)})
		if err == nil || !strings.Contains(err.Error(), `"caBundle"`) {
			t.Errorf("%s: %v, want an error naming caBundle", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "MHcCAQEEIA") {
			t.Errorf("%s: the error repeats the Secret's content: %v", name, err)
		}
	}
}
