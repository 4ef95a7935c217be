package vco

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The endpoint policy decides where a credential may send the client. It is the program's,
// never the credential's: the manager reconciles every tenant's VCOClusters with one process,
// so a tenant's Secret must not choose plain http, a host the operator did not intend, or the
// cloud metadata service next to the manager. The rules (docs/capvco/credentials.md):
//
//  1. url and iamURL are absolute http(s) URLs with a host, without user:password@, a query or
//     a fragment.
//  2. A link-local address (169.254.0.0/16 with the metadata service 169.254.169.254,
//     fe80::/10), a multicast, broadcast or unspecified address, and the metadata addresses
//     that are not link-local (fd00:ec2::254, 100.100.100.200) are refused unless the address
//     itself is listed in AllowedHosts. The client's own transport checks the address it
//     connects to as well, so a name resolving to such an address is refused too.
//  3. With AllowedHosts set, the host must be listed (an entry without a port allows every
//     port of the host).
//  4. Plain http needs AllowHTTP, except to a loopback host (127.0.0.0/8, ::1, localhost),
//     where the token never leaves the machine.

// PolicyFlags name the flags that set Options.AllowHTTP and Options.AllowedHosts, so a refusal
// says what to change. An empty AllowedHosts means the program has no such flag.
type PolicyFlags struct {
	AllowHTTP, AllowedHosts string
}

// ManagerFlags are the manager's flags, the default.
var ManagerFlags = PolicyFlags{AllowHTTP: "--vco-allow-http", AllowedHosts: "--vco-allowed-hosts"}

// hostPort is one allowed host: a lower-case name or a canonical IP, and a port ("" = any).
type hostPort struct {
	host, port string
}

func (h hostPort) String() string {
	host := h.host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if h.port == "" {
		return host
	}
	return host + ":" + h.port
}

// ParseAllowedHosts reads allow-list entries (host, host:port, an IP, [IPv6]:port), as the
// manager's --vco-allowed-hosts takes them; empty entries are skipped. flag names the flag in
// errors.
func ParseAllowedHosts(flag string, entries []string) ([]string, error) {
	var out []string
	var errs []error
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		h, err := parseHostPort(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s entry %q: %w", flag, e, err))
			continue
		}
		out = append(out, h.String())
	}
	return out, errors.Join(errs...)
}

func parseHostPort(e string) (hostPort, error) {
	if strings.Contains(e, "/") || strings.Contains(e, "@") {
		return hostPort{}, errors.New("give a host or host:port (e.g. try.whitesky.cloud or try.whitesky.cloud:443), not a URL")
	}
	host, port := e, ""
	bare := strings.TrimSuffix(strings.TrimPrefix(e, "["), "]")
	if a, err := netip.ParseAddr(bare); err == nil { // a bare IPv6 address has colons but no port
		return hostPort{host: canonicalIP(a)}, nil
	}
	if strings.Contains(e, ":") {
		var err error
		if host, port, err = net.SplitHostPort(e); err != nil {
			return hostPort{}, errors.New("not host or host:port (an IPv6 address with a port is [address]:port)")
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return hostPort{}, fmt.Errorf("port %q is not a number between 1 and 65535", port)
		}
	}
	host = normalHost(host)
	if host == "" || strings.ContainsAny(host, " \t?#%[]") {
		return hostPort{}, errors.New("not a host name or IP address")
	}
	return hostPort{host: host, port: port}, nil
}

// normalHost lower-cases a name, drops a trailing dot and writes an IP in its canonical form,
// so that entries and URLs compare equal however they are spelled.
func normalHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
	if a, err := netip.ParseAddr(h); err == nil {
		return canonicalIP(a)
	}
	return h
}

func canonicalIP(a netip.Addr) string { return a.Unmap().WithZone("").String() }

// endpoint is a parsed url or iamURL: host is normalHost's form, port is explicit or the
// scheme's, shown is the URL's own host[:port] for messages.
type endpoint struct {
	scheme, host, port, shown string
}

// parseEndpoint checks rule 1. The messages quote the host at most, never the URL: one with a
// password in it must not reach a condition.
func parseEndpoint(key, raw, example string) (endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "" {
		return endpoint{}, fmt.Errorf("%q must be an https URL such as %s", key, example)
	}
	if u.User != nil {
		return endpoint{}, fmt.Errorf("%q carries a user name or password (user@host): the client authenticates with %q or %q and %q, never with the URL",
			key, SecretKeyJWT, SecretKeyClientID, SecretKeyClientSecret)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return endpoint{}, fmt.Errorf("%q has a query or fragment: give the base URL only, such as %s", key, example)
	}
	e := endpoint{scheme: u.Scheme, host: normalHost(u.Hostname()), port: u.Port(), shown: u.Host}
	if e.port == "" {
		e.port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return e, nil
}

// policy is what Options say about endpoints.
type policy struct {
	allowHTTP bool
	hosts     []hostPort
	flags     PolicyFlags
}

func newPolicy(o Options) (policy, error) {
	p := policy{allowHTTP: o.AllowHTTP, flags: o.Flags}
	if p.flags.AllowHTTP == "" {
		p.flags = ManagerFlags
	}
	for _, e := range o.AllowedHosts {
		if strings.TrimSpace(e) == "" {
			continue
		}
		h, err := parseHostPort(strings.TrimSpace(e))
		if err != nil {
			return policy{}, fmt.Errorf("vco: allowed host %q: %w", e, err)
		}
		p.hosts = append(p.hosts, h)
	}
	return p, nil
}

func (p policy) listed(host, port string) bool {
	return slices.ContainsFunc(p.hosts, func(h hostPort) bool { return h.host == host && (h.port == "" || h.port == port) })
}

// check applies rules 2-4 to the credential's URL under key.
func (p policy) check(key, raw string) error {
	e, err := parseEndpoint(key, raw, "https://try.whitesky.cloud/api/1")
	if err != nil {
		return err
	}
	if a, err := netip.ParseAddr(e.host); err == nil && special(a) && !p.listed(e.host, e.port) {
		return fmt.Errorf("%q names %s, a link-local, metadata, multicast or unspecified address%s", key, e.host, p.listHint(e.host))
	}
	if len(p.hosts) > 0 && !p.listed(e.host, e.port) {
		allowed := make([]string, len(p.hosts))
		for i, h := range p.hosts {
			allowed[i] = h.String()
		}
		return fmt.Errorf("%q names host %s, which this program does not allow (%s=%s)", key, e.shown, p.flags.AllowedHosts, strings.Join(allowed, ","))
	}
	if e.scheme == "http" && !p.allowHTTP && !loopback(e.host) {
		return fmt.Errorf("%q is http://%s: the client sends tokens and secrets only over https (plain http, for a simulator, is allowed by the program's %s, never by the credential)",
			key, e.shown, p.flags.AllowHTTP)
	}
	return nil
}

func (p policy) listHint(host string) string {
	if p.flags.AllowedHosts == "" {
		return ": refused"
	}
	return fmt.Sprintf(": refused unless listed in %s (e.g. %s=%s)", p.flags.AllowedHosts, p.flags.AllowedHosts, hostPort{host: host})
}

// loopback reports a host that never leaves the machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// metadataAddrs are metadata services outside the link-local ranges: AWS's IPv6 one and
// Alibaba Cloud's.
var metadataAddrs = []netip.Addr{netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200")}

// special reports the addresses of rule 2.
func special(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	return a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() || a.IsMulticast() ||
		a.IsUnspecified() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || slices.Contains(metadataAddrs, a)
}

// errRefusedAddress is what the client's transport answers for a connection rule 2 forbids.
var errRefusedAddress = errors.New("refused address")

// guardedTransport is http.DefaultTransport whose connections check the address they reach, so
// a host name resolving to a metadata address is refused as its literal address would be.
func guardedTransport(p policy) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: p.refuseSpecial}
	t.DialContext = d.DialContext
	return t
}

// refuseSpecial is a net.Dialer Control: it runs on the resolved address before connecting.
func (p policy) refuseSpecial(_, address string, _ syscall.RawConn) error {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !special(a) || p.listed(canonicalIP(a), port) {
		return nil
	}
	return fmt.Errorf("vco: %w: the API or IAM host resolves to %s, a link-local, metadata, multicast or unspecified address%s",
		errRefusedAddress, canonicalIP(a), p.listHint(canonicalIP(a)))
}

// checkEndpoints applies the program's policy to both URLs of a credential.
func checkEndpoints(c Credentials, o Options) error {
	p, err := newPolicy(o)
	if err != nil {
		return err
	}
	var errs []error
	if err := p.check(SecretKeyURL, c.URL); err != nil {
		errs = append(errs, err)
	}
	if c.IAMURL != "" {
		if err := p.check(SecretKeyIAMURL, c.IAMURL); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("vco: credentials refused: %w", errors.Join(errs...))
	}
	return nil
}
