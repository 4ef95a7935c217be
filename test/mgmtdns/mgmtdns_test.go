// Package mgmtdns tests config/mgmt-dns: a real resolver (unbound, the Debian package) under
// the shipped configuration follows a changed record at once, although the platform serves it
// with its fixed 3600 s TTL; the same resolver without it keeps the old address.
package mgmtdns

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// platformTTL is the TTL whitesky.cloud gives every record.
const platformTTL = 3600

const name = "api.prod.example.com"

// TestResolverFollowsAChangedRecord: the record moves from one address to another; under the
// shipped configuration the next lookup through unbound returns the new address, without it
// unbound answers the old one from its cache.
func TestResolverFollowsAChangedRecord(t *testing.T) {
	shipped, err := filepath.Abs("../../config/mgmt-dns/unbound-no-cache.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		include string
		follows bool
	}{
		{"config/mgmt-dns", shipped, true},
		{"unbound's defaults", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			auth := startAuthority(t, "192.0.2.10")
			resolver := startUnbound(t, auth, tc.include)
			if got := lookup(t, resolver); got != "192.0.2.10" {
				t.Fatalf("first lookup: %s", got)
			}
			auth.set("198.51.100.20")
			got := lookup(t, resolver)
			switch {
			case tc.follows && got != "198.51.100.20":
				t.Fatalf("after the record changed, the resolver answers %s (the old address, cached for the platform's %d s TTL)", got, platformTTL)
			case !tc.follows && got != "192.0.2.10":
				t.Fatalf("without the configuration the resolver answered %s: the test would not tell a cached answer from a fresh one", got)
			}
		})
	}
}

// authority answers A queries for name with its current address and the platform's TTL, as
// whitesky.cloud's DNS does.
type authority struct {
	addr string
	mu   sync.Mutex
	ip   net.IP
}

func (a *authority) set(ip string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ip = net.ParseIP(ip).To4()
}

func startAuthority(t *testing.T, ip string) *authority {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	a := &authority{addr: pc.LocalAddr().String()}
	a.set(ip)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			a.mu.Lock()
			reply, err := answer(buf[:n], a.ip)
			a.mu.Unlock()
			if err == nil {
				_, _ = pc.WriteTo(reply, from)
			}
		}
	}()
	return a
}

// answer builds the reply to one query: the A record of name, authoritative, or NXDOMAIN.
func answer(q []byte, ip net.IP) ([]byte, error) {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil, errors.New("not one question")
	}
	end := 12
	var labels []string
	for end < len(q) && q[end] != 0 {
		l := int(q[end])
		if end+1+l > len(q) {
			return nil, errors.New("short name")
		}
		labels = append(labels, string(q[end+1:end+1+l]))
		end += 1 + l
	}
	end++ // the root label
	if end+4 > len(q) {
		return nil, errors.New("short question")
	}
	qtype := binary.BigEndian.Uint16(q[end : end+2])
	question := q[12 : end+4]
	reply := append([]byte{}, q[0:2]...)
	match := strings.EqualFold(strings.Join(labels, "."), name)
	flags := uint16(0x8400) // response, authoritative
	if !match {
		flags |= 3 // NXDOMAIN
	}
	reply = binary.BigEndian.AppendUint16(reply, flags)
	ancount := uint16(0)
	if match && qtype == 1 {
		ancount = 1
	}
	reply = binary.BigEndian.AppendUint16(reply, 1)
	reply = binary.BigEndian.AppendUint16(reply, ancount)
	reply = append(reply, 0, 0, 0, 0)
	reply = append(reply, question...)
	if ancount == 1 {
		reply = append(reply, 0xc0, 12) // the question's name
		reply = binary.BigEndian.AppendUint16(reply, 1)
		reply = binary.BigEndian.AppendUint16(reply, 1)
		reply = binary.BigEndian.AppendUint32(reply, platformTTL)
		reply = binary.BigEndian.AppendUint16(reply, 4)
		reply = append(reply, ip...)
	}
	return reply, nil
}

// startUnbound runs unbound in the foreground on a free loopback port, forwarding to the
// authority, with the shipped drop-in included when include is set.
func startUnbound(t *testing.T, auth *authority, include string) string {
	t.Helper()
	bin, err := exec.LookPath("unbound")
	if err != nil {
		for _, p := range []string{"/usr/sbin/unbound", "/sbin/unbound"} {
			if _, serr := os.Stat(p); serr == nil {
				bin, err = p, nil
			}
		}
	}
	if err != nil {
		t.Fatal("unbound is not installed: bash hack/install-deps.sh installs it (Debian package unbound)")
	}
	host, authPort, _ := net.SplitHostPort(auth.addr)
	// A port free when chosen may be taken before unbound binds it (other tests run beside this
	// one): unbound then exits with "could not open ports", and another port is tried.
	for attempt := 1; ; attempt++ {
		port := freePort(t)
		addr, bound := runUnbound(t, bin, port, unboundConfig(t, port, host, authPort, include))
		if bound {
			return addr
		}
		if attempt == 5 {
			t.Fatalf("unbound could not bind a port in %d attempts", attempt)
		}
	}
}

func unboundConfig(t *testing.T, port int, host, authPort, include string) string {
	t.Helper()
	cfg := fmt.Sprintf(`server:
    interface: 127.0.0.1@%d
    port: %d
    do-ip6: no
    do-daemonize: no
    use-syslog: no
    logfile: ""
    verbosity: 1
    username: ""
    chroot: ""
    pidfile: ""
    directory: "%s"
    do-not-query-localhost: no
    module-config: "iterator"
    access-control: 127.0.0.0/8 allow
forward-zone:
    name: "example.com."
    forward-addr: %s@%s
`, port, port, t.TempDir(), host, authPort)
	if include != "" {
		cfg += fmt.Sprintf("include: %q\n", include)
	}
	return cfg
}

// runUnbound starts unbound with cfg and waits until it answers on port (addr); bound is false
// when it exited because the port was taken.
func runUnbound(t *testing.T, bin string, port int, cfg string) (addr string, bound bool) {
	t.Helper()
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	path := filepath.Join(t.TempDir(), "unbound.conf")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(filepath.Dir(bin), "unbound-checkconf"), path).CombinedOutput(); err != nil {
		t.Fatalf("unbound-checkconf: %v\n%s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-d", "-c", path)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	var logMu sync.Mutex
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			logMu.Lock()
			log.WriteString(s.Text() + "\n")
			logMu.Unlock()
		}
	}()
	exited := make(chan struct{})
	go func() {
		<-logged // the pipe is read to its end before Wait closes it
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			logMu.Lock()
			t.Logf("unbound's log:\n%s", log.String())
			logMu.Unlock()
		}
	})
	// Wait for unbound to answer (it starts in well under a second; the bound is for a loaded
	// machine, and only bounds how long a broken start takes to fail).
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			logMu.Lock()
			taken := strings.Contains(log.String(), "could not open ports")
			logMu.Unlock()
			if taken {
				t.Logf("port %d was taken before unbound bound it; trying another", port)
				return addr, false
			}
			t.Fatalf("unbound exited before answering on %s", addr)
		default:
		}
		r := resolver(addr)
		_, lerr := r.LookupHost(context.Background(), "ready.invalid.example.com")
		var dnsErr *net.DNSError
		if lerr == nil || (errors.As(lerr, &dnsErr) && dnsErr.IsNotFound) {
			return addr, true
		}
		if time.Now().After(deadline) {
			t.Fatalf("unbound did not answer on %s", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// resolver asks addr only: Go's own resolver keeps no cache, so what it returns is what unbound
// answered.
func resolver(addr string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

func lookup(t *testing.T, addr string) string {
	t.Helper()
	ips, err := resolver(addr).LookupIP(context.Background(), "ip4", name)
	if err != nil || len(ips) != 1 {
		t.Fatalf("lookup %s through unbound: %v %v", name, ips, err)
	}
	return ips[0].String()
}

// freePort is a port of 127.0.0.1 free for both UDP and TCP when asked (unbound binds both).
func freePort(t *testing.T) int {
	t.Helper()
	for {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := pc.LocalAddr().(*net.UDPAddr).Port
		l, terr := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
		pc.Close()
		if terr == nil {
			l.Close()
			return port
		}
	}
}
