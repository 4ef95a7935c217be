// Package health probes control-plane API servers: the platform load balancer has no health
// checks, so the controller admits to the server pool only the machines whose API server
// completes a TLS handshake.
package health

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"sync"
	"time"
)

// Prober checks one API server.
type Prober interface {
	Probe(ctx context.Context, address string, port int) error
}

// TLSProber completes a TLS handshake with address:port. It proves that an API server (or at
// least a TLS server) answers there; the certificate is not verified, because a joining
// machine's serving certificate is not known to the management cluster yet.
type TLSProber struct {
	// Timeout bounds one probe (default 3 s).
	Timeout time.Duration
	// Dial opens the connection; nil dials TCP directly. Tests route addresses here.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Probe implements Prober.
func (p TLSProber) Probe(ctx context.Context, address string, port int) error {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dial := p.Dial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	raw, err := dial(ctx, "tcp", net.JoinHostPort(address, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	defer raw.Close()
	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, ServerName: address}) //nolint:gosec // liveness only, see TLSProber
	return conn.HandshakeContext(ctx)
}

// Healthy probes every address concurrently and returns those that answered, in input order.
func Healthy(ctx context.Context, p Prober, addresses []string, port int) []string {
	ok := make([]bool, len(addresses))
	var wg sync.WaitGroup
	for i, a := range addresses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok[i] = p.Probe(ctx, a, port) == nil
		}()
	}
	wg.Wait()
	var out []string
	for i, a := range addresses {
		if ok[i] {
			out = append(out, a)
		}
	}
	return out
}
