package vcosim

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// tokenIssuer is the iss claim; the real IAM is itsyou.online-like.
const tokenIssuer = "vcosim-iam"

// refreshGrace is how long after expiry a token may still be exchanged for a new one.
const refreshGrace = 7 * 24 * time.Hour

type claims struct {
	jwt.RegisteredClaims
	Username string `json:"username"`
	Customer string `json:"customer_id"`
	Scope    string `json:"scope"`
}

// Token signs a JWT for a principal, valid for ttl (Options.TokenTTL when ttl is 0).
func (s *Sim) Token(principal string, ttl time.Duration) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.Principals[principal]
	if p == nil {
		return "", fmt.Errorf("no principal %q", principal)
	}
	return s.sign(p, ttl)
}

func (s *Sim) sign(p *Principal, ttl time.Duration) (string, error) {
	if ttl == 0 {
		ttl = s.opts.TokenTTL
	}
	now := s.opts.Now()
	cl := claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: tokenIssuer, Subject: p.Name, IssuedAt: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)), ID: randomHex(8),
		},
		Username: p.Name, Customer: p.Customer, Scope: "user:memberof:" + p.Customer,
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, cl).SignedString(s.key)
}

// parse verifies a token's signature; expired tokens are returned with jwt.ErrTokenExpired.
func (s *Sim) parse(raw string, allowExpired bool) (*claims, error) {
	cl := &claims{}
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer(tokenIssuer), jwt.WithTimeFunc(s.opts.Now)}
	if allowExpired {
		opts = append(opts, jwt.WithoutClaimsValidation())
	}
	_, err := jwt.ParseWithClaims(raw, cl, func(*jwt.Token) (any, error) { return s.key, nil }, opts...)
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// authenticate checks the Bearer token and returns a copy of its principal.
func (s *Sim) authenticate(r *http.Request) (*Principal, error) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || raw == "" {
		return nil, errf(http.StatusUnauthorized, "Unauthorized: missing Bearer token in the Authorization header")
	}
	cl, err := s.parse(raw, false)
	if errors.Is(err, jwt.ErrTokenExpired) {
		return nil, errf(http.StatusUnauthorized, "Unauthorized: JWT has expired")
	}
	if err != nil {
		return nil, errf(http.StatusUnauthorized, "Unauthorized: invalid JWT")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.st.Principals[cl.Subject]
	if p == nil {
		return nil, errf(http.StatusUnauthorized, "Unauthorized: the identity of this JWT no longer exists")
	}
	cp := *p
	return &cp, nil
}

// resource is what a request touches, from the most general to the most specific.
type resource struct {
	location   string
	cloudspace string
	vm         int
	disk       int
}

func (g Grant) allows(perm string) bool {
	return len(g.Permissions) == 0 || slices.Contains(g.Permissions, perm)
}

// can applies the grant model: a customer grant covers everything; a location grant covers
// every resource in the location (cloudspaces and their VMs too); a cloudspace grant covers
// the cloudspace and what hangs under its path, but not location-scoped paths such as disk
// create; vm and disk grants cover only that VM or disk.
func (p *Principal) can(perm string, r resource) bool {
	for _, g := range p.Grants {
		if !g.allows(perm) {
			continue
		}
		switch g.ResourceType {
		case "customer":
			return true
		case "location":
			if r.location != "" && g.ResourceID == r.location {
				return true
			}
		case "cloudspace":
			if r.cloudspace != "" && g.ResourceID == r.cloudspace {
				return true
			}
		case "vm":
			if r.vm != 0 && g.ResourceID == r.cloudspace+":"+strconv.Itoa(r.vm) {
				return true
			}
		case "disk":
			if r.disk != 0 && g.ResourceID == strconv.Itoa(r.disk) {
				return true
			}
		}
	}
	return false
}

// customerWide tells whether the principal holds a customer grant, i.e. may learn that
// something does not exist instead of being refused.
func (p *Principal) customerWide() bool {
	for _, g := range p.Grants {
		if g.ResourceType == "customer" {
			return true
		}
	}
	return false
}

func describe(r resource) string {
	switch {
	case r.vm != 0:
		return fmt.Sprintf("vm %s:%d", r.cloudspace, r.vm)
	case r.disk != 0:
		return fmt.Sprintf("disk %d", r.disk)
	case r.cloudspace != "":
		return "cloudspace " + r.cloudspace
	case r.location != "":
		return "location " + r.location
	}
	return "customer"
}

// allow refuses with the 403 the platform gives for a missing grant.
func (c *call) allow(perm string, r resource) error {
	if c.principal.can(perm, r) {
		return nil
	}
	return forbidden("Forbidden: access denied: %s permission on %s is not granted to this credential", perm, describe(r))
}

// customer resolves {customer_id} and checks that the caller belongs to it.
func (c *call) customer() (*Customer, error) {
	id := c.path("customer_id")
	cu := c.sim.st.Customers[id]
	if cu == nil {
		return nil, notFound("NotFound: Customer not found")
	}
	if c.principal.Customer != id && !c.principal.Operator {
		return nil, forbidden("Forbidden: no access to customer %s", id)
	}
	return cu, nil
}

// customerWith resolves {customer_id} and checks perm on the customer itself, which only a
// customer grant gives (customer-wide DNS records, the certificate store).
func (c *call) customerWith(perm string) (*Customer, error) {
	cu, err := c.customer()
	if err != nil {
		return nil, err
	}
	return cu, c.allow(perm, resource{})
}

// location resolves {location} for the customer and checks perm on it.
func (c *call) location(perm string) (*Customer, *Location, error) {
	cu, err := c.customer()
	if err != nil {
		return nil, nil, err
	}
	name := c.path("location")
	loc := c.sim.st.Locations[name]
	if loc == nil || !slices.Contains(cu.Locations, name) {
		return nil, nil, forbidden("Forbidden: Customer has no access to location")
	}
	if err := c.allow(perm, resource{location: name}); err != nil {
		return nil, nil, err
	}
	return cu, loc, nil
}

// cloudspace resolves {cloudspace_id} and checks perm on it. Callers without a customer
// grant get 403 for an unknown id, so ids of other tenants cannot be probed.
func (c *call) cloudspace(perm string) (*Cloudspace, error) {
	cu, err := c.customer()
	if err != nil {
		return nil, err
	}
	id := c.path("cloudspace_id")
	cs := c.sim.st.Cloudspaces[id]
	if cs == nil || cs.Customer != cu.ID || cs.Status == statusDestroyed {
		if c.principal.customerWide() {
			return nil, notFound("NotFound: Cloudspace %s not found", id)
		}
		return nil, forbidden("Forbidden: access denied: %s permission on cloudspace %s is not granted to this credential", perm, id)
	}
	if err := c.allow(perm, resource{location: cs.Location, cloudspace: cs.ID}); err != nil {
		return nil, err
	}
	return cs, nil
}

// vm resolves {cloudspace_id}/{vm_id}; a vm grant is enough.
func (c *call) vm(perm string) (*Cloudspace, *VM, error) {
	cu, err := c.customer()
	if err != nil {
		return nil, nil, err
	}
	id, err := c.pathInt("vm_id")
	if err != nil {
		return nil, nil, err
	}
	csID := c.path("cloudspace_id")
	cs := c.sim.st.Cloudspaces[csID]
	vm := c.sim.st.VMs[id]
	if cs == nil || cs.Customer != cu.ID || vm == nil || vm.CloudspaceID != csID || vm.Status == statusDestroyed {
		if c.principal.customerWide() {
			return nil, nil, notFound("NotFound: Virtual machine %d not found in cloudspace %s", id, csID)
		}
		return nil, nil, forbidden("Forbidden: access denied: %s permission on vm %s:%d is not granted to this credential", perm, csID, id)
	}
	if err := c.allow(perm, resource{location: cs.Location, cloudspace: cs.ID, vm: vm.ID}); err != nil {
		return nil, nil, err
	}
	return cs, vm, nil
}

// requireCustomerAdmin guards image publishing and the SSL certificate store: a service
// credential with grants (what a cluster holds) is refused even with a customer grant.
func (c *call) requireCustomerAdmin(what string) error {
	if c.principal.CustomerAdmin || c.principal.Operator {
		return nil
	}
	return forbidden("Forbidden: %s requires a customer admin or operator credential; this credential only has resource grants", what)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// IAM endpoints (not in the customer swagger): client credentials and refresh, both answering
// the raw JWT text as the itsyou.online-style IAM does.

func (s *Sim) iamRoutes() []*route {
	return []*route{
		{Route: Route{Method: http.MethodPost, Base: iamBase, Path: "/v1/oauth/access_token", Query: []string{"grant_type", "client_id", "client_secret", "response_type", "validity"}}, auth: authNone, handle: s.accessToken},
		{Route: Route{Method: http.MethodGet, Base: iamBase, Path: "/v1/oauth/jwt/refresh", Query: []string{"validity"}}, auth: authNone, handle: s.refreshToken},
	}
}

// accessToken serves POST /iam/v1/oauth/access_token with form fields (or query arguments)
// grant_type=client_credentials, client_id, client_secret.
func (s *Sim) accessToken(c *call) (any, error) {
	if err := c.r.ParseForm(); err != nil {
		return nil, badRequest("Bad Request: unreadable form")
	}
	get := func(k string) string {
		c.declared(k)
		return c.r.Form.Get(k)
	}
	if gt := get("grant_type"); gt != "client_credentials" {
		return nil, badRequest("Bad Request: unsupported grant_type %q (only client_credentials)", gt)
	}
	id, secret := get("client_id"), get("client_secret")
	_ = get("response_type")
	ttl, err := validity(get("validity"))
	if err != nil {
		return nil, err
	}
	for _, p := range s.st.Principals {
		if p.ClientID != "" && p.ClientID == id && subtle.ConstantTimeCompare([]byte(p.Secret), []byte(secret)) == 1 {
			tok, err := s.sign(p, ttl)
			if err != nil {
				return nil, err
			}
			return rawText(tok), nil
		}
	}
	return nil, errf(http.StatusUnauthorized, "Unauthorized: invalid client_id or client_secret")
}

// refreshToken serves GET /iam/v1/oauth/jwt/refresh: a valid (or recently expired) token in,
// a fresh one out.
func (s *Sim) refreshToken(c *call) (any, error) {
	raw, ok := strings.CutPrefix(c.r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, errf(http.StatusUnauthorized, "Unauthorized: missing Bearer token")
	}
	cl, err := s.parse(raw, true)
	if err != nil {
		return nil, errf(http.StatusUnauthorized, "Unauthorized: invalid JWT")
	}
	if cl.ExpiresAt != nil && s.opts.Now().After(cl.ExpiresAt.Add(refreshGrace)) {
		return nil, errf(http.StatusUnauthorized, "Unauthorized: JWT expired too long ago to refresh")
	}
	p := s.st.Principals[cl.Subject]
	if p == nil {
		return nil, errf(http.StatusUnauthorized, "Unauthorized: the identity of this JWT no longer exists")
	}
	ttl, err := validity(c.str("validity"))
	if err != nil {
		return nil, err
	}
	tok, err := s.sign(p, ttl)
	if err != nil {
		return nil, err
	}
	return rawText(tok), nil
}

func validity(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	secs, err := strconv.Atoi(v)
	if err != nil || secs <= 0 {
		return 0, badRequest("Bad Request: validity must be a positive number of seconds")
	}
	return time.Duration(secs) * time.Second, nil
}
