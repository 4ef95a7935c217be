package servicelb

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// HTTPProber asks a node's health port, as a cloud load balancer's health check would:
// GET /healthz answered 200. kube-proxy serves it on its health port (for
// externalTrafficPolicy Cluster) and on a Service's healthCheckNodePort (200 only where the
// Service has a ready local endpoint).
type HTTPProber struct {
	// Timeout bounds one probe (default 3 s).
	Timeout time.Duration
	// Dial opens the connection; nil dials TCP directly. Tests route addresses here.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Probe implements health.Prober.
func (p HTTPProber) Probe(ctx context.Context, address string, port int) error {
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
	client := &http.Client{
		Transport:     &http.Transport{DialContext: dial, DisableKeepAlives: true, Proxy: nil},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	url := "http://" + net.JoinHostPort(address, strconv.Itoa(port)) + "/healthz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	return nil
}
