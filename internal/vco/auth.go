package vco

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// refreshSkew is how long before expiry a token is replaced; paasctl uses the same minute.
const refreshSkew = time.Minute

// tokenSource hands out a valid JWT: the configured one while it is fresh, then one from the
// IAM (refresh with the old token, else client credentials). Tokens never leave this type
// except in the Authorization header.
type tokenSource struct {
	creds Credentials
	http  *http.Client
	now   func() time.Time

	mu    sync.Mutex
	token string
	exp   time.Time // zero when the token carries no exp
	stale bool      // the API rejected it; get a new one
}

func newTokenSource(c Credentials, hc *http.Client, now func() time.Time) *tokenSource {
	ts := &tokenSource{creds: c, http: hc, now: now, token: c.JWT}
	if c.JWT != "" {
		ts.exp, _ = tokenExpiry(c.JWT)
	}
	return ts
}

// tokenExpiry's errors are fixed texts: they never quote the token.
var (
	errMalformedJWT = errors.New("the JWT is malformed")
	errJWTExp       = errors.New("the JWT has an invalid exp claim")
)

// tokenExpiry reads exp without verifying the signature: the client cannot verify it and
// only needs to know when to refresh.
func tokenExpiry(raw string) (time.Time, error) {
	claims := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(raw, claims); err != nil {
		return time.Time{}, errMalformedJWT
	}
	exp, err := claims.GetExpirationTime()
	if err != nil {
		return time.Time{}, errJWTExp
	}
	if exp == nil {
		return time.Time{}, nil
	}
	return exp.Time, nil
}

func (t *tokenSource) fresh() bool {
	return t.token != "" && !t.stale && (t.exp.IsZero() || t.now().Add(refreshSkew).Before(t.exp))
}

// canRenew says whether a rejected token can be replaced, i.e. whether a 401 is worth a retry.
func (t *tokenSource) canRenew() bool {
	return t.creds.IAMURL != "" && (t.creds.ClientID != "" || t.token != "")
}

func (t *tokenSource) get(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fresh() {
		return t.token, nil
	}
	var errs []error
	if t.token != "" && t.creds.IAMURL != "" {
		tok, err := t.fetch(ctx, http.MethodGet, "/v1/oauth/jwt/refresh", nil, t.token)
		if err == nil {
			return t.set(tok)
		}
		errs = append(errs, fmt.Errorf("refresh: %w", err))
	}
	if t.creds.ClientID != "" {
		form := url.Values{"grant_type": {"client_credentials"}, "client_id": {t.creds.ClientID},
			"client_secret": {t.creds.ClientSecret}, "response_type": {"id_token"}}
		tok, err := t.fetch(ctx, http.MethodPost, "/v1/oauth/access_token", form, "")
		if err == nil {
			return t.set(tok)
		}
		errs = append(errs, fmt.Errorf("client credentials for %s: %w", t.creds.ClientID, err))
	}
	if len(errs) == 0 {
		if t.token == "" {
			return "", fmt.Errorf("vco: no token: %w", ErrUnauthorized)
		}
		if t.stale {
			return t.token, nil // nothing to renew with; let the API answer
		}
		return "", fmt.Errorf("vco: the JWT expired at %s and cannot be renewed: set %q (and %q/%q) in the credentials: %w",
			t.exp.UTC().Format(time.RFC3339), SecretKeyIAMURL, SecretKeyClientID, SecretKeyClientSecret, ErrUnauthorized)
	}
	if err := errors.Join(errs...); errors.Is(err, ErrUntrustedCertificate) {
		return "", fmt.Errorf("vco: cannot obtain a token: %w", err) // the credential may be right: the certificate is the problem
	}
	return "", fmt.Errorf("vco: cannot obtain a token: %w: %w", errors.Join(errs...), ErrUnauthorized)
}

func (t *tokenSource) set(tok string) (string, error) {
	exp, err := tokenExpiry(tok)
	if err != nil {
		return "", fmt.Errorf("vco: the IAM answered something that is not a JWT: %w", ErrUnauthorized)
	}
	t.token, t.exp, t.stale = tok, exp, false
	return tok, nil
}

// secrets are the values an error answer must never repeat: the client secret, the
// configured JWT and the token of the request.
func (t *tokenSource) secrets(token string) []string {
	return []string{t.creds.ClientSecret, t.creds.JWT, token}
}

// invalidate marks the token the API just refused, unless another call already replaced it.
func (t *tokenSource) invalidate(tok string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token == tok {
		t.stale = true
	}
}

// fetch calls the IAM. Its answer is the raw JWT text; a JSON string or an object with
// jwt/token/access_token is accepted too, as paasctl does.
func (t *tokenSource) fetch(ctx context.Context, method, path string, form url.Values, bearer string) (string, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(t.creds.IAMURL, "/")+path, body)
	if err != nil {
		return "", fmt.Errorf("bad IAM URL: %w", err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := t.http.Do(req)
	if terr := untrustedCertificate(err); terr != nil {
		return "", fmt.Errorf("IAM: %w", terr)
	}
	if err != nil {
		return "", stripURL(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1)) // a JWT is a few KiB
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", newAPIError(op{name: "IAMToken", method: method, path: path}, resp.StatusCode, b, 0).scrub(t.secrets(bearer)...)
	}
	return parseTokenBody(b)
}

func parseTokenBody(b []byte) (string, error) {
	b = bytes.TrimSpace(b)
	var s string
	if json.Unmarshal(b, &s) == nil {
		return s, nil
	}
	var obj map[string]any
	if json.Unmarshal(b, &obj) == nil {
		for _, k := range []string{"jwt", "token", "access_token"} {
			if v, ok := obj[k].(string); ok {
				return v, nil
			}
		}
		return "", errors.New("IAM answer has no jwt, token or access_token")
	}
	return string(b), nil
}

// stripURL drops the request URL from a transport error: it may carry query arguments
// (the API takes some secrets there, such as a VM's tpm_secret) that must not reach logs.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
