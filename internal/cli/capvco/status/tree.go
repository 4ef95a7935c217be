package status

import (
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// node is one line of the tree and its children.
type node struct {
	text     string
	children []*node
}

func (n *node) add(format string, a ...any) *node {
	c := &node{text: fmt.Sprintf(format, a...)}
	n.children = append(n.children, c)
	return c
}

func (n *node) write(w io.Writer, prefix string) {
	for i, c := range n.children {
		branch, cont := "├─ ", "│  "
		if i == len(n.children)-1 {
			branch, cont = "└─ ", "   "
		}
		fmt.Fprintln(w, prefix+branch+c.text)
		c.write(w, prefix+cont)
	}
}

func ready(st *cmdutil.Styles, c Condition) string { return conditionGist(st, "Ready", c) }

// conditionGist is "Type=Status", coloured, with the reason unless True.
func conditionGist(st *cmdutil.Styles, typ string, c Condition) string {
	s := typ + "=" + c.Status
	switch c.Status {
	case "True":
		s = st.OK(s)
	case "False":
		s = st.Bad(s)
	default:
		s = st.Warn(s)
	}
	if c.Status != "True" && c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	return s
}

func writeTree(w io.Writer, st *cmdutil.Styles, cl Cluster) {
	head := fmt.Sprintf("%s %s/%s  ", st.Bold("Cluster"), cl.Namespace, cl.Name)
	switch {
	case !cl.ClusterFound:
		head += st.Warn("no Cluster API Cluster of this name")
	case cl.Available == nil:
		head += st.Warn("Available not reported yet")
	default:
		head += conditionGist(st, "Available", *cl.Available)
	}
	fmt.Fprintln(w, head)
	root := &node{}
	infra := fmt.Sprintf("VCOCluster %s  %s", cl.VCOCluster, ready(st, cl.Ready))
	if cl.Deleting {
		infra += "  " + st.Warn("deleting")
	}
	root.add("%s", infra)
	ep := cl.Endpoint
	if ep == "" {
		ep = st.Warn("not set yet")
	}
	root.add("Endpoint %s", ep)

	sites := root.add("Cloudspaces (%d %s)", len(cl.Sites), pluralWord(len(cl.Sites), "site"))
	for _, s := range cl.Sites {
		origin := s.Origin
		switch origin {
		case "adopted":
			origin = st.Info("adopted")
		case "pending":
			origin = st.Warn("pending")
		}
		line := fmt.Sprintf("%s  %s  %s", s.Name, s.Location, s.Cloudspace)
		if s.ID != "" {
			line += " (" + s.ID + ")"
		}
		line += "  " + origin
		if s.ExternalIP != "" {
			line += "  " + s.ExternalIP
		}
		sites.add("%s", line)
	}

	if cl.LB != nil {
		lb := root.add("Load balancer %s  %s  pool %s", cl.LB.ID, orDash(cl.LB.Address), orDash(cl.LB.ServerPool))
		if len(cl.LB.Members) == 0 {
			lb.add("%s", st.Bad("no healthy API server in the pool"))
		}
		for _, m := range cl.LB.Members {
			who := ""
			if m.Machine != "" {
				who = "  " + m.Machine
			}
			lb.add("%s %s%s", st.OK("healthy"), m.Address, who)
		}
	} else {
		root.add("Load balancer %s", st.Warn("not created yet"))
	}

	if cl.DNS != nil {
		pub := st.OK("published")
		if !cl.DNS.Published {
			pub = st.Warn("not published yet")
		}
		root.add("DNS %s  %s  TTL %ds", cl.DNS.Name, pub, cl.DNS.TTLSeconds)
	}

	machines := root.add("Machines (%d)", len(cl.Machines))
	for _, m := range cl.Machines {
		vm := st.Warn("no VM yet")
		if m.VMID != nil {
			vm = fmt.Sprintf("VM %d", *m.VMID)
			if m.Cloudspace != "" {
				vm += " in " + m.Cloudspace
			}
		}
		line := fmt.Sprintf("%s  %s  %s", m.Name, ready(st, m.Ready), vm)
		if m.Site != "" {
			line += "  site " + m.Site
		}
		if len(m.Addresses) > 0 {
			line += "  " + strings.Join(m.Addresses, ",")
		}
		if m.InLBPool {
			line += "  " + st.Info("in LB pool")
		}
		if m.Deleting {
			line += "  " + st.Warn("deleting")
		}
		mn := machines.add("%s", line)
		for _, g := range m.GPUs {
			att := st.Warn("unattached")
			if g.Attached {
				att = st.OK("attached")
			}
			mn.add("vGPU %s  %s  %s  %s", g.Name, orDash(g.ID), orDash(g.ProfileID), att)
		}
	}

	conditionNodes(root.add("VCOCluster conditions"), st, cl.Conditions)
	if cl.ClusterFound {
		conditionNodes(root.add("Cluster conditions"), st, cl.ClusterConditions)
	}
	root.write(w, "")
}

// conditionNodes adds one child per condition: Type=Status, the reason and the message on one
// line.
func conditionNodes(conds *node, st *cmdutil.Styles, conditions []metav1.Condition) {
	for _, c := range conditions {
		line := fmt.Sprintf("%s=%s", c.Type, c.Status)
		switch c.Status {
		case "True":
			line = st.OK(line)
		case "False":
			line = st.Bad(line)
		default:
			line = st.Warn(line)
		}
		if c.Reason != "" {
			line += "  " + c.Reason
		}
		if c.Message != "" {
			// A summary condition's message has one line per condition; a tree row has one.
			line += ": " + strings.ReplaceAll(strings.TrimSpace(c.Message), "\n", "; ")
		}
		conds.add("%s", line)
	}
	if len(conditions) == 0 {
		conds.add("%s", st.Faint("none reported yet"))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func pluralWord(n int, w string) string {
	if n == 1 {
		return w
	}
	return w + "s"
}
