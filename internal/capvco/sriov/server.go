package sriov

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Handler serves the agent's API to the CNI plugin: POST /v1/attach, GET /v1/attachment and
// POST /v1/detach (the last two take an AttachmentKey).
func Handler(a *Agent) http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("POST /v1/attach", func(w http.ResponseWriter, r *http.Request) {
		var req AttachRequest
		if !decodeBody(w, r, &req) {
			return
		}
		att, err := a.Attach(r.Context(), req)
		answer(w, att, err)
	})
	m.HandleFunc("POST /v1/attachment", func(w http.ResponseWriter, r *http.Request) {
		var k AttachmentKey
		if !decodeBody(w, r, &k) {
			return
		}
		att, err := a.Get(k)
		answer(w, att, err)
	})
	m.HandleFunc("POST /v1/detach", func(w http.ResponseWriter, r *http.Request) {
		var k AttachmentKey
		if !decodeBody(w, r, &k) {
			return
		}
		answer(w, struct{}{}, a.Detach(r.Context(), k))
	})
	return m
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(v); err != nil {
		http.Error(w, "the body is not the agent's JSON: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func answer(w http.ResponseWriter, v any, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Listen opens the agent's unix socket, readable and writable by root only: whoever can call
// it attaches NICs with the agent's credential.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// Client calls an agent on its unix socket.
type Client struct {
	Socket string
	// Timeout bounds one call; attaching waits on the platform, so it is long.
	Timeout time.Duration
}

func (c Client) call(ctx context.Context, path string, in, out any) error {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	hc := &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", c.Socket)
		},
	}}
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent"+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("the SR-IOV agent on %s: %w (is the capvco-sriov-agent DaemonSet running on this node?)", c.Socket, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the SR-IOV agent: %s", bytes.TrimSpace(body))
	}
	return json.Unmarshal(body, out)
}

// Attach asks the agent for a NIC.
func (c Client) Attach(ctx context.Context, req AttachRequest) (*Attachment, error) {
	var att Attachment
	return &att, c.call(ctx, "/v1/attach", req, &att)
}

// Get asks the agent for an attachment (nil when there is none).
func (c Client) Get(ctx context.Context, k AttachmentKey) (*Attachment, error) {
	var att *Attachment
	return att, c.call(ctx, "/v1/attachment", k, &att)
}

// Detach asks the agent to detach an attachment's NIC.
func (c Client) Detach(ctx context.Context, k AttachmentKey) error {
	var out struct{}
	return c.call(ctx, "/v1/detach", k, &out)
}
