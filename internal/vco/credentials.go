package vco

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Keys of the CAPVCO credentials Secret (and of what cmd/vcosim prints).
const (
	SecretKeyURL          = "url"
	SecretKeyCustomer     = "customer"
	SecretKeyJWT          = "jwt"
	SecretKeyClientID     = "clientID"
	SecretKeyClientSecret = "clientSecret"
	SecretKeyIAMURL       = "iamURL"
	// SecretKeyAllowHTTP "true" lets the client talk plain http to a non-loopback host: for a
	// simulator in the management cluster only, never for whitesky.cloud.
	SecretKeyAllowHTTP = "allowHTTP"
)

// Credentials are what a client is built from: the API URL, the customer, and either a JWT
// or client credentials exchanged at the IAM. With both, the JWT is used first and the
// client credentials mint a new one when it expires.
type Credentials struct {
	// URL is the API base, e.g. https://try.whitesky.cloud/api/1.
	URL string
	// Customer is the customer id every /customers/{customer_id} path uses.
	Customer string
	// JWT is a bearer token (the portal's "COPY JWT", or a service account's).
	JWT string
	// ClientID and ClientSecret are exchanged for a JWT at IAMURL.
	ClientID     string
	ClientSecret string
	// IAMURL is the token service base, e.g. https://iam.example.com; it is needed for client
	// credentials and for refreshing a JWT before it expires.
	IAMURL string
	// AllowHTTP permits http:// URLs on hosts other than loopback (SecretKeyAllowHTTP): the
	// token and the client secret then cross the network unencrypted. For simulators only.
	AllowHTTP bool
}

// CredentialsFromSecret reads the keys of a credentials Secret's data.
func CredentialsFromSecret(data map[string][]byte) (Credentials, error) {
	c := Credentials{
		URL: strings.TrimSpace(string(data[SecretKeyURL])), Customer: strings.TrimSpace(string(data[SecretKeyCustomer])),
		JWT: strings.TrimSpace(string(data[SecretKeyJWT])), ClientID: strings.TrimSpace(string(data[SecretKeyClientID])),
		ClientSecret: strings.TrimSpace(string(data[SecretKeyClientSecret])), IAMURL: strings.TrimSpace(string(data[SecretKeyIAMURL])),
		AllowHTTP: strings.TrimSpace(string(data[SecretKeyAllowHTTP])) == "true",
	}
	return c, c.Validate()
}

// Validate says what is missing, naming Secret keys so the message is actionable.
func (c Credentials) Validate() error {
	var errs []error
	if c.URL == "" {
		errs = append(errs, fmt.Errorf("%q (the API URL, e.g. https://try.whitesky.cloud/api/1) is empty", SecretKeyURL))
	} else if err := c.checkURL(SecretKeyURL, c.URL, "https://try.whitesky.cloud/api/1"); err != nil {
		errs = append(errs, err)
	}
	if c.IAMURL != "" {
		if err := c.checkURL(SecretKeyIAMURL, c.IAMURL, "https://iam.example.com"); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Customer == "" {
		errs = append(errs, fmt.Errorf("%q (the customer id) is empty", SecretKeyCustomer))
	}
	hasClient := c.ClientID != "" || c.ClientSecret != ""
	switch {
	case c.JWT == "" && !hasClient:
		errs = append(errs, fmt.Errorf("set %q, or %q and %q", SecretKeyJWT, SecretKeyClientID, SecretKeyClientSecret))
	case hasClient && (c.ClientID == "" || c.ClientSecret == ""):
		errs = append(errs, fmt.Errorf("%q and %q must be set together", SecretKeyClientID, SecretKeyClientSecret))
	case hasClient && c.IAMURL == "":
		errs = append(errs, fmt.Errorf("%q is needed to exchange client credentials for a token", SecretKeyIAMURL))
	}
	if len(errs) > 0 {
		return fmt.Errorf("vco: invalid credentials: %w", errors.Join(errs...))
	}
	return nil
}

// checkURL accepts an https URL with a host, and an http one only on a loopback host or with
// AllowHTTP: the client sends the JWT and the client secret to these URLs.
func (c Credentials) checkURL(key, raw, example string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q must be an https URL such as %s", key, example)
	}
	if u.Scheme == "http" && !c.AllowHTTP && !loopback(u.Hostname()) {
		return fmt.Errorf("%q is http://%s: the client sends tokens and secrets only over https (plain http is for a simulator: set %q to \"true\")",
			key, u.Host, SecretKeyAllowHTTP)
	}
	return nil
}

// loopback reports a host that never leaves the machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// String never shows the token, the secret or a password embedded in a URL, so credentials
// are safe in logs and errors.
func (c Credentials) String() string {
	mode := "jwt"
	if c.ClientID != "" {
		mode = "client " + c.ClientID
	}
	return fmt.Sprintf("vco.Credentials{URL: %s, Customer: %s, Auth: %s}", safeURL(c.URL), c.Customer, mode)
}

// safeURL is a URL without its password, query and fragment (either may carry a token).
func safeURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "redacted")
	}
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	return u.String()
}

// GoString keeps %#v as safe as %v.
func (c Credentials) GoString() string { return c.String() }
