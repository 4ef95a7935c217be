// Package transittest is a small transit engine for tests: the Vault/OpenBao transit API's
// request and response shapes (datakey, encrypt, decrypt under /v1/<mount>/, X-Vault-Token,
// {"errors": [...]} on failure) over AES-256-GCM keys held in memory.
package transittest

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Server is a transit engine mounted at Mount with one token.
type Server struct {
	*httptest.Server
	Mount, Token string

	mu    sync.Mutex
	keys  map[string]cipher.AEAD
	calls []string
}

// New starts a transit engine with the named keys; it stops with the test.
func New(t testing.TB, mount, token string, keys ...string) *Server {
	s := &Server{Mount: mount, Token: token, keys: map[string]cipher.AEAD{}}
	for _, k := range keys {
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			t.Fatal(err)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			t.Fatal(err)
		}
		gcm, err := cipher.NewGCM(block)
		if err != nil {
			t.Fatal(err)
		}
		s.keys[k] = gcm
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Calls lists the operations served, e.g. "datakey/plaintext/k".
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

func fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string][]string{"errors": {msg}})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Vault-Token") != s.Token {
		fail(w, http.StatusForbidden, "permission denied")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/"+s.Mount+"/")
	if !ok || r.Method != http.MethodPost {
		fail(w, http.StatusNotFound, "no handler for route")
		return
	}
	i := strings.LastIndex(rest, "/")
	if i < 0 {
		fail(w, http.StatusNotFound, "no handler for route")
		return
	}
	op, name := rest[:i], rest[i+1:]
	s.mu.Lock()
	gcm := s.keys[name]
	s.calls = append(s.calls, op+"/"+name)
	s.mu.Unlock()
	if gcm == nil {
		fail(w, http.StatusBadRequest, "encryption key not found")
		return
	}
	var in struct {
		Plaintext  string `json:"plaintext"`
		Ciphertext string `json:"ciphertext"`
		Bits       int    `json:"bits"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		fail(w, http.StatusBadRequest, "failed to parse JSON input")
		return
	}
	data := map[string]any{}
	switch op {
	case "datakey/plaintext", "datakey/wrapped":
		bits := in.Bits
		if bits == 0 {
			bits = 256
		}
		if bits != 128 && bits != 256 && bits != 512 {
			fail(w, http.StatusBadRequest, "invalid bit length")
			return
		}
		key := make([]byte, bits/8)
		_, _ = rand.Read(key)
		data["ciphertext"] = seal(gcm, key)
		data["key_version"] = 1
		if op == "datakey/plaintext" {
			data["plaintext"] = base64.StdEncoding.EncodeToString(key)
		}
	case "encrypt":
		pt, err := base64.StdEncoding.DecodeString(in.Plaintext)
		if err != nil {
			fail(w, http.StatusBadRequest, "failed to base64-decode plaintext")
			return
		}
		data["ciphertext"], data["key_version"] = seal(gcm, pt), 1
	case "decrypt":
		pt, ok := open(gcm, in.Ciphertext)
		if !ok {
			fail(w, http.StatusBadRequest, "invalid ciphertext: unable to decrypt")
			return
		}
		data["plaintext"] = base64.StdEncoding.EncodeToString(pt)
	default:
		fail(w, http.StatusNotFound, "no handler for route")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"request_id": "test", "lease_id": "", "renewable": false, "lease_duration": 0, "data": data})
}

func seal(gcm cipher.AEAD, pt []byte) string {
	nonce := make([]byte, gcm.NonceSize())
	_, _ = rand.Read(nonce)
	return "vault:v1:" + base64.StdEncoding.EncodeToString(gcm.Seal(nonce, nonce, pt, nil))
}

func open(gcm cipher.AEAD, ct string) ([]byte, bool) {
	b64, ok := strings.CutPrefix(ct, "vault:v1:")
	if !ok {
		return nil, false
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) < gcm.NonceSize() {
		return nil, false
	}
	pt, err := gcm.Open(nil, raw[:gcm.NonceSize()], raw[gcm.NonceSize():], nil)
	return pt, err == nil
}
