package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// A platform network (platform.go) connects a management cluster's namespace to other
// namespaces of the harness with veth pairs: the platform's router, and behind it one namespace
// per machine. None of them may have a way off the machine either. Each is checked by its links
// alone: a packet leaves a network namespace only through one of its interfaces, so when every
// interface of every namespace reachable from a cluster is loopback, a bridge, or one end of a
// veth pair whose other end is in another namespace of the harness (or a pod's veth on that
// namespace's CNI bridge), no packet can reach the host's interfaces, whatever the routes say.
// Routes inside those namespaces (a machine's default route to its cloudspace router) only
// choose among such interfaces.

// nsidNames maps `ip -j netns list-id` output: a namespace's ids of the other named namespaces.
type nsidName struct {
	ID   int    `json:"nsid"`
	Name string `json:"name"`
}

// linksOf reads a namespace's links with their details and its ids of the other namespaces.
func linksOf(ctx context.Context, netns string) (links, nsids []byte, err error) {
	if links, err = run(ctx, "ip", "-n", netns, "-d", "-j", "link", "show"); err != nil {
		return nil, nil, err
	}
	if nsids, err = run(ctx, "ip", "-n", netns, "-j", "netns", "list-id"); err != nil {
		return nil, nil, err
	}
	return links, nsids, nil
}

func parseLinks(linksJSON, nsidsJSON []byte) ([]link, map[int]string, error) {
	var links []link
	if err := json.Unmarshal(linksJSON, &links); err != nil {
		return nil, nil, fmt.Errorf("parse ip link output: %w", err)
	}
	names := map[int]string{}
	if len(strings.TrimSpace(string(nsidsJSON))) > 0 {
		var ids []nsidName
		if err := json.Unmarshal(nsidsJSON, &ids); err != nil {
			return nil, nil, fmt.Errorf("parse ip netns list-id output: %w", err)
		}
		for _, id := range ids {
			names[id.ID] = id.Name
		}
	}
	return links, names, nil
}

// harnessPeer reports whether k is a veth whose other end is in a named namespace of the
// harness, and which. A veth into the host's namespace (which has no name) or any other
// namespace is not.
func harnessPeer(k link, names map[int]string) (string, bool) {
	if k.LinkInfo.Kind != "veth" || k.PeerNSID == nil {
		return "", false
	}
	name, ok := names[*k.PeerNSID]
	return name, ok && strings.HasPrefix(name, netnsPrefix)
}

// linkProblems lists the links of a platform namespace that could lead off the machine: anything
// but loopback, bridges, veths within the namespace, pods' veths on its CNI bridge and veths to
// other namespaces of the harness, which it returns.
func linkProblems(netns string, links []link, names map[int]string) (problems, peers []string) {
	for _, k := range links {
		switch {
		case k.Name == "lo", k.LinkInfo.Kind == "bridge":
		case k.LinkInfo.Kind == "veth" && k.PeerNSID == nil:
		case k.LinkInfo.Kind == "veth" && k.Master == bridgeName:
		default:
			peer, ok := harnessPeer(k, names)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: unexpected interface %s (%s %s)", netns, k.Name, k.LinkInfo.Kind, k.LinkType))
				continue
			}
			peers = append(peers, peer)
		}
	}
	return problems, peers
}

// closureProblems checks every namespace reachable from start through veths (start included,
// whose own links the caller checks) and lists the links that could lead off the machine.
func closureProblems(ctx context.Context, start []string) ([]string, error) {
	seen := map[string]bool{start[0]: true}
	queue := append([]string(nil), start[1:]...)
	var problems []string
	for len(queue) > 0 {
		ns := queue[0]
		queue = queue[1:]
		if seen[ns] {
			continue
		}
		seen[ns] = true
		linksJSON, nsidsJSON, err := linksOf(ctx, ns)
		if err != nil {
			return nil, err
		}
		links, names, err := parseLinks(linksJSON, nsidsJSON)
		if err != nil {
			return nil, fmt.Errorf("network namespace %s: %w", ns, err)
		}
		more, peers := linkProblems(ns, links, names)
		problems = append(problems, more...)
		queue = append(queue, peers...)
	}
	sort.Strings(problems)
	return problems, nil
}
