package vco

import (
	"errors"
	"fmt"
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
	// SecretKeyAllowHTTP is refused: it once let a credential choose plain http, so a tenant's
	// Secret could make the shared manager send requests wherever it liked. Plain http is now
	// the choice of the program using the credential (Options.AllowHTTP, from the manager's
	// --vco-allow-http or the tools' --allow-http). The key stays named so that a Secret still
	// carrying it gets a message saying so instead of being silently ignored.
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
	// CABundle is PEM CA certificates trusted for url and iamURL besides the system's (tls.go).
	CABundle []byte
}

// errAllowHTTPKey names both programs' flags: the Secret is read by the manager and by the
// gpucheck tools alike, and the key means nothing to either any more.
var errAllowHTTPKey = fmt.Errorf("the key %q is no longer honoured: a credential cannot choose plain http, the program using it does "+
	"(the manager: --vco-allow-http; capvco-gpucheck and kubectl capvco gpucheck: --allow-http); delete the key from the Secret", SecretKeyAllowHTTP)

// CredentialsFromSecret reads the keys of a credentials Secret's data. Whether the URLs may be
// used (https, the allowed hosts) is the client's decision, made by New and Factory.Client
// with the program's Options: the Secret cannot decide it.
func CredentialsFromSecret(data map[string][]byte) (Credentials, error) {
	c := Credentials{
		URL: strings.TrimSpace(string(data[SecretKeyURL])), Customer: strings.TrimSpace(string(data[SecretKeyCustomer])),
		JWT: strings.TrimSpace(string(data[SecretKeyJWT])), ClientID: strings.TrimSpace(string(data[SecretKeyClientID])),
		ClientSecret: strings.TrimSpace(string(data[SecretKeyClientSecret])), IAMURL: strings.TrimSpace(string(data[SecretKeyIAMURL])),
		CABundle: data[SecretKeyCABundle],
	}
	err := c.Validate()
	if _, ok := data[SecretKeyAllowHTTP]; ok {
		err = errors.Join(fmt.Errorf("vco: invalid credentials: %w", errAllowHTTPKey), err)
	}
	return c, err
}

// Validate says what is missing or malformed, naming Secret keys so the message is
// actionable. It does not judge where the URLs point: that is the program's policy (New).
func (c Credentials) Validate() error {
	var errs []error
	if c.URL == "" {
		errs = append(errs, fmt.Errorf("%q (the API URL, e.g. https://try.whitesky.cloud/api/1) is empty", SecretKeyURL))
	} else if _, err := parseEndpoint(SecretKeyURL, c.URL, "https://try.whitesky.cloud/api/1"); err != nil {
		errs = append(errs, err)
	}
	if c.IAMURL != "" {
		if _, err := parseEndpoint(SecretKeyIAMURL, c.IAMURL, "https://iam.example.com"); err != nil {
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
	if len(c.CABundle) > 0 {
		if _, err := parseCABundle(c.CABundle); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("vco: invalid credentials: %w", errors.Join(errs...))
	}
	return nil
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
