package health_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/capx-io/capx/internal/capvco/health"
)

// listen serves on loopback: TLS handshakes when tlsOn, else a plain TCP accept-and-close.
func listen(t *testing.T, tlsOn bool) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if tlsOn {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kube-apiserver"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				if tc, ok := c.(*tls.Conn); ok {
					_ = tc.Handshake()
				}
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// TestTLSProber: only a completed TLS handshake is healthy, whatever the certificate.
func TestTLSProber(t *testing.T) {
	closed := func(t *testing.T) int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		return port
	}
	for _, tc := range []struct {
		name    string
		port    func(t *testing.T) int
		healthy bool
	}{
		{name: "TLS server with a self-signed certificate", port: func(t *testing.T) int { return listen(t, true) }, healthy: true},
		{name: "plain TCP that closes: not an API server", port: func(t *testing.T) int { return listen(t, false) }},
		{name: "nothing listening", port: closed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := health.TLSProber{Timeout: 5 * time.Second}.Probe(context.Background(), "127.0.0.1", tc.port(t))
			if (err == nil) != tc.healthy {
				t.Fatalf("probe: %v, want healthy=%v", err, tc.healthy)
			}
		})
	}
}

// TestTLSProberDial: the injected dialer carries the probe (how tests route addresses).
func TestTLSProberDial(t *testing.T) {
	port := listen(t, true)
	var dialed string
	p := health.TLSProber{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed = addr
		var d net.Dialer
		return d.DialContext(ctx, network, "127.0.0.1:"+strconv.Itoa(port))
	}}
	if err := p.Probe(context.Background(), "192.168.103.10", 6443); err != nil {
		t.Fatal(err)
	}
	if dialed != "192.168.103.10:6443" {
		t.Fatalf("dialed %q", dialed)
	}
}

type probeFunc func(address string) error

func (f probeFunc) Probe(_ context.Context, address string, _ int) error { return f(address) }

// TestHealthy: the addresses that answered, in input order.
func TestHealthy(t *testing.T) {
	down := map[string]bool{"b": true, "d": true}
	p := probeFunc(func(a string) error {
		if down[a] {
			return errors.New("refused")
		}
		return nil
	})
	for _, tc := range []struct {
		in, want []string
	}{
		{[]string{"a", "b", "c", "d"}, []string{"a", "c"}},
		{[]string{"c", "a"}, []string{"c", "a"}},
		{[]string{"b", "d"}, nil},
		{nil, nil},
	} {
		if got := health.Healthy(context.Background(), p, tc.in, 6443); !slices.Equal(got, tc.want) {
			t.Errorf("Healthy(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
