package localcluster

import (
	"fmt"
	"strings"
	"testing"
)

// The route and link lists are trimmed `ip -j` output from a running cluster's namespace.
const (
	clusterRoutes = `[{"dst":"10.100.0.0/16","dev":"cni0","protocol":"kernel","scope":"link","prefsrc":"10.100.0.1","flags":[]},
{"type":"local","dst":"10.200.0.0/16","dev":"lo","table":"local","scope":"host","flags":[]},
{"type":"local","dst":"127.0.0.0/8","dev":"lo","table":"local","protocol":"kernel","scope":"host","prefsrc":"127.0.0.1","flags":[]},
{"dst":"fe80::/64","dev":"cni0","protocol":"kernel","metric":256,"flags":[],"pref":"medium"},
{"type":"local","dst":"::1","dev":"lo","table":"local","protocol":"kernel","metric":0,"flags":[],"pref":"medium"}]`
	clusterLinks = `[{"ifindex":1,"ifname":"lo","link_type":"loopback"},
{"ifindex":2,"ifname":"cni0","link_type":"ether"},
{"ifindex":3,"ifname":"veth1a2b3c4d","master":"cni0","link_type":"ether","link_netnsid":0}]`
)

func TestIsolationProblems(t *testing.T) {
	cases := []struct {
		name, routes, links string
		want                []string // substrings, one per expected problem
	}{
		{"running cluster", clusterRoutes, clusterLinks, nil},
		{"IPv4 default route", `[{"dst":"default","gateway":"192.0.2.1","dev":"eth0","flags":[]}]`, `[{"ifname":"lo"}]`,
			[]string{"default route via 192.0.2.1"}},
		{"IPv6 default route in another table", `[{"dst":"default","gateway":"fe80::1","dev":"eth0","table":"100","flags":[]}]`, `[{"ifname":"lo"}]`,
			[]string{"table 100"}},
		{"explicit 0.0.0.0/0", `[{"dst":"0.0.0.0/0","dev":"tun0","flags":[]}]`, `[{"ifname":"lo"}]`,
			[]string{"default route"}},
		{"route through a gateway", `[{"dst":"198.51.100.0/24","gateway":"10.100.0.254","dev":"cni0","flags":[]}]`, `[{"ifname":"lo"}]`,
			[]string{"through a gateway 10.100.0.254"}},
		{"foreign interface", clusterRoutes, `[{"ifname":"lo"},{"ifname":"eth0","link_type":"ether"}]`,
			[]string{"unexpected interface eth0"}},
		{"veth not on the bridge", clusterRoutes, `[{"ifname":"lo"},{"ifname":"veth0","link_type":"ether"}]`,
			[]string{"unexpected interface veth0"}},
		{"no interfaces", `[]`, `[]`, []string{"no interfaces"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := isolationProblems([]byte(tc.routes), []byte(tc.links), []byte(`[]`))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d matching %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("problem %q does not mention %q", got[i], tc.want[i])
				}
			}
		})
	}
	if _, _, err := isolationProblems([]byte("not json"), []byte("[]"), []byte("[]")); err == nil {
		t.Error("want an error for unparsable ip output")
	}
}

// TestPlatformVeths: a veth into a named namespace of the harness (a platform network) is
// allowed and returned for the closure check; one into the host's namespace (no name), a
// namespace of someone else, or an interface of another kind is refused; and the closure check
// of a platform namespace allows bridges, its machines' veths and pods' veths on its CNI bridge.
func TestPlatformVeths(t *testing.T) {
	const nsids = `[{"nsid":0,"name":"capx-vco"},{"nsid":1,"name":"other"}]`
	veth := func(name string, nsid int) string {
		return fmt.Sprintf(`{"ifname":%q,"link_type":"ether","link_netnsid":%d,"linkinfo":{"info_kind":"veth"}}`, name, nsid)
	}
	links := `[{"ifname":"lo"},` + veth("vco0", 0) + `]`
	problems, peers, err := isolationProblems([]byte(clusterRoutes), []byte(links), []byte(nsids))
	if err != nil || len(problems) != 0 || len(peers) != 1 || peers[0] != "capx-vco" {
		t.Errorf("veth into the platform: problems %q, peers %q, %v", problems, peers, err)
	}
	for name, l := range map[string]string{
		"host":    veth("vco0", 7),
		"foreign": veth("vco0", 1),
		"tun":     `{"ifname":"tun0","link_type":"none","linkinfo":{"info_kind":"tun"}}`,
	} {
		problems, peers, _ := isolationProblems([]byte(clusterRoutes), []byte(`[{"ifname":"lo"},`+l+`]`), []byte(nsids))
		if len(problems) != 1 || len(peers) != 0 {
			t.Errorf("%s: problems %q, peers %q: want one refusal", name, problems, peers)
		}
	}
	router := `[{"ifname":"lo"},{"ifname":"cs0","linkinfo":{"info_kind":"bridge"}},` + veth("vm12", 0) +
		`,{"ifname":"veth9","master":"cni0","link_netnsid":3,"linkinfo":{"info_kind":"veth"}},` + veth("up", 7) +
		`,{"ifname":"eth1","link_type":"ether"}]`
	l, names, err := parseLinks([]byte(router), []byte(nsids))
	if err != nil {
		t.Fatal(err)
	}
	problems, peers = linkProblems("capx-vco", l, names)
	if len(problems) != 2 || !strings.Contains(problems[0], "up") || !strings.Contains(problems[1], "eth1") || len(peers) != 1 {
		t.Errorf("platform namespace: problems %q, peers %q", problems, peers)
	}
}

func TestNewLayout(t *testing.T) {
	r := resolved{Options: Options{Name: "b", Dir: "/tmp/c/b", BinDir: "/bin"}}
	l, err := newLayout(r, 1)
	if err != nil {
		t.Fatal(err)
	}
	if l.APIServerPort != 16444 || l.PodCIDR != "10.101.0.0/16" || l.ServiceCIDR != "10.201.0.0/16" ||
		l.NodeIP != "10.101.0.1" || l.APIServiceIP != "10.201.0.1" || l.NetNS != "capx-b" {
		t.Errorf("layout %+v", l)
	}
	r.PodCIDR, r.ServiceCIDR = "10.0.0.0/8", "10.96.0.0/12"
	if _, err := newLayout(r, 0); err == nil {
		t.Error("want an error for overlapping ranges")
	}
	for _, bad := range []string{"A", "-a", "a-", "abcdefghijklm", "a_b"} {
		if _, err := resolve(Options{Name: bad, Dir: "/tmp/x", BinDir: "/bin"}); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
}
