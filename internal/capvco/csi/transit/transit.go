// Package transit wraps and unwraps volume keys with a Vault or OpenBao transit key: the
// driver asks the transit engine for a new data key per volume (datakey/plaintext), keeps only
// the wrapped form, and asks it to decrypt that form whenever a node opens the volume. The
// transit key itself never leaves the vault.
package transit

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode"
)

// Client calls one transit key.
type Client struct {
	// Address is the vault's base URL.
	Address string
	// Mount is the transit engine's mount path, Key the key's name.
	Mount, Key string
	// Namespace is sent as X-Vault-Namespace when set.
	Namespace string
	// Token returns the vault token; it is read for every call, so a rotated token file is
	// picked up.
	Token func() (string, error)
	// HTTP is the client to use; nil means http.DefaultClient.
	HTTP *http.Client
}

// KeyBytes is the size of a volume key: 256 bits.
const KeyBytes = 32

// ErrDenied is a 403 from the vault: the token may not use the key.
var ErrDenied = errors.New("the vault refused the token")

// NewDataKey makes a new volume key. It returns the key and its wrapped form; only the
// wrapped form may be stored.
func (c *Client) NewDataKey(ctx context.Context) (key []byte, wrapped string, err error) {
	var out struct {
		Data struct {
			Plaintext  string `json:"plaintext"`
			Ciphertext string `json:"ciphertext"`
		} `json:"data"`
	}
	if err := c.post(ctx, "datakey/plaintext", map[string]any{"bits": KeyBytes * 8}, &out); err != nil {
		return nil, "", err
	}
	key, err = base64.StdEncoding.DecodeString(out.Data.Plaintext)
	if err != nil || len(key) != KeyBytes {
		return nil, "", fmt.Errorf("transit datakey: the answer's plaintext is not a %d-byte key in base64", KeyBytes)
	}
	if err := CheckWrapped(out.Data.Ciphertext); err != nil {
		return nil, "", fmt.Errorf("transit datakey: %w", err)
	}
	return key, out.Data.Ciphertext, nil
}

// Unwrap decrypts a wrapped volume key.
func (c *Client) Unwrap(ctx context.Context, wrapped string) ([]byte, error) {
	if err := CheckWrapped(wrapped); err != nil {
		return nil, err
	}
	var out struct {
		Data struct {
			Plaintext string `json:"plaintext"`
		} `json:"data"`
	}
	if err := c.post(ctx, "decrypt", map[string]any{"ciphertext": wrapped}, &out); err != nil {
		return nil, err
	}
	key, err := base64.StdEncoding.DecodeString(out.Data.Plaintext)
	if err != nil || len(key) != KeyBytes {
		return nil, fmt.Errorf("transit decrypt: the answer's plaintext is not a %d-byte key in base64", KeyBytes)
	}
	return key, nil
}

// CheckWrapped accepts what a transit key produces: vault:v<version>:<base64>, nothing else.
func CheckWrapped(s string) error {
	rest, ok := strings.CutPrefix(s, "vault:v")
	ver, b64, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || ver == "" || strings.TrimFunc(ver, unicode.IsDigit) != "" || len(s) > 1024 {
		return errors.New("the wrapped key is not a transit ciphertext (vault:v<n>:<base64>)")
	}
	if _, err := base64.StdEncoding.DecodeString(b64); err != nil {
		return errors.New("the wrapped key is not a transit ciphertext: its payload is not base64")
	}
	return nil
}

func (c *Client) post(ctx context.Context, op string, in, out any) error {
	tok, err := c.Token()
	if err != nil {
		return fmt.Errorf("vault token: %w", err)
	}
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	target := strings.TrimRight(c.Address, "/") + "/v1/" + strings.Trim(c.Mount, "/") + "/" + op + "/" + url.PathEscape(c.Key)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-Vault-Token", strings.TrimSpace(tok))
	req.Header.Set("Content-Type", "application/json")
	if c.Namespace != "" {
		req.Header.Set("X-Vault-Namespace", c.Namespace)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("transit %s on key %s: %w", op, c.Key, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("transit %s on key %s: %w", op, c.Key, err)
	}
	if resp.StatusCode != http.StatusOK {
		return answerError(op, c.Key, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("transit %s on key %s: the answer is not the transit engine's JSON", op, c.Key)
	}
	return nil
}

// answerError names the vault's own errors ({"errors": [...]}); a body of another shape (a
// proxy's page) is not repeated.
func answerError(op, key string, status int, body []byte) error {
	var e struct {
		Errors []string `json:"errors"`
	}
	msg := fmt.Sprintf("HTTP %d", status)
	if json.Unmarshal(body, &e) == nil && len(e.Errors) > 0 {
		msg += ": " + clip(strings.Join(e.Errors, "; "), 300)
	}
	err := fmt.Errorf("transit %s on key %s: %s", op, key, msg)
	if status == http.StatusForbidden {
		return fmt.Errorf("%w (%w): the token needs update on %s/%s and %s", err, ErrDenied, "datakey/plaintext", key, "decrypt")
	}
	return err
}

func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, s)
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
