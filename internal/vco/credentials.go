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
}

// CredentialsFromSecret reads the keys of a credentials Secret's data.
func CredentialsFromSecret(data map[string][]byte) (Credentials, error) {
	c := Credentials{
		URL: strings.TrimSpace(string(data[SecretKeyURL])), Customer: strings.TrimSpace(string(data[SecretKeyCustomer])),
		JWT: strings.TrimSpace(string(data[SecretKeyJWT])), ClientID: strings.TrimSpace(string(data[SecretKeyClientID])),
		ClientSecret: strings.TrimSpace(string(data[SecretKeyClientSecret])), IAMURL: strings.TrimSpace(string(data[SecretKeyIAMURL])),
	}
	return c, c.Validate()
}

// Validate says what is missing, naming Secret keys so the message is actionable.
func (c Credentials) Validate() error {
	var errs []error
	if c.URL == "" {
		errs = append(errs, fmt.Errorf("%q (the API URL, e.g. https://try.whitesky.cloud/api/1) is empty", SecretKeyURL))
	} else if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, fmt.Errorf("%q must be an http(s) URL such as https://try.whitesky.cloud/api/1", SecretKeyURL))
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

// String never shows the token or the secret, so credentials are safe in logs and errors.
func (c Credentials) String() string {
	mode := "jwt"
	if c.ClientID != "" {
		mode = "client " + c.ClientID
	}
	return fmt.Sprintf("vco.Credentials{URL: %s, Customer: %s, Auth: %s}", c.URL, c.Customer, mode)
}

// GoString keeps %#v as safe as %v.
func (c Credentials) GoString() string { return c.String() }
