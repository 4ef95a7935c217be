package statekey

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// maxGrantBytes bounds the manager's answer.
const maxGrantBytes = 4 << 10

// Fetch asks the manager at url for the key of the runner Pod's state, presenting the
// projected token in tokenFile and trusting only the certificates in caPEM.
func Fetch(ctx context.Context, url string, caPEM []byte, tokenFile string) (Grant, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return Grant{}, errors.New("statekey: the manager's CA certificate is not PEM")
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return Grant{}, fmt.Errorf("statekey: read the Pod's state-key token: %w", err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13},
		Proxy:           nil, // the key never goes through a proxy
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Grant{}, fmt.Errorf("statekey: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := hc.Do(req)
	if err != nil {
		return Grant{}, fmt.Errorf("statekey: ask the manager for the state key: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxGrantBytes))
	if err != nil {
		return Grant{}, fmt.Errorf("statekey: read the manager's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Grant{}, fmt.Errorf("statekey: the manager refused the state key (%s): %.512s", resp.Status, strings.TrimSpace(string(body)))
	}
	var g Grant
	if err := json.Unmarshal(body, &g); err != nil || len(g.Key) != KeyBytes || g.Namespace == "" || g.Suffix == "" || g.Master == "" {
		return Grant{}, errors.New("statekey: the manager's answer is not a state key")
	}
	return g, nil
}
