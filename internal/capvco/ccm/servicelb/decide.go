// Package servicelb keeps the platform load balancers of Services of type LoadBalancer: per
// site (cloudspace) whose nodes back the Service, one server pool and one L4 load balancer per
// Service port, forwarding to the port's nodePort on the pool members. The platform load
// balancer has no health checks, so, as CAPVCO does for the API server, the CCM chooses the
// members itself: Ready nodes that answer the Service's health check.
package servicelb

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/capx-io/capx/internal/vco"
)

// Names. Kubernetes names cannot hold "_", CAPVCO's separator, so a name is an exact ownership
// test: a Service's objects are those whose name is its pool's, or starts with it and "_".

// PoolName names the Service's server pool in each of its cloudspaces:
// capvco_<namespace>_<cluster>_svc_<service namespace>_<service name>.
func PoolName(namespace, cluster string, svc *corev1.Service) string {
	return strings.Join([]string{"capvco", namespace, cluster, "svc", svc.Namespace, svc.Name}, "_")
}

// LoadBalancerName names the load balancer of one Service port: the pool's name and the port's
// name ("default" for the one unnamed port a Service may have), so a port whose number,
// protocol or nodePort changes keeps its load balancer and is updated in place.
func LoadBalancerName(pool string, port corev1.ServicePort) string {
	key := port.Name
	if key == "" {
		key = "default"
	}
	return pool + "_" + key
}

// Owned reports whether a platform load balancer called name belongs to the pool's Service.
func Owned(pool, name string) bool {
	rest, ok := strings.CutPrefix(name, pool+"_")
	return ok && rest != "" && !strings.Contains(rest, "_")
}

// Unsupported refuses what the platform load balancer cannot do, naming the field: creating a
// load balancer that silently ignores it would claim what is not there.
func Unsupported(svc *corev1.Service) error {
	var errs []error
	if len(svc.Spec.LoadBalancerSourceRanges) > 0 {
		errs = append(errs, errors.New("spec.loadBalancerSourceRanges: the platform load balancer has no source filter; remove it (or filter in a NetworkPolicy)"))
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		errs = append(errs, errors.New("spec.sessionAffinity ClientIP: the platform load balancer has no session affinity"))
	}
	if a := svc.Spec.AllocateLoadBalancerNodePorts; a != nil && !*a {
		errs = append(errs, errors.New("spec.allocateLoadBalancerNodePorts false: the platform load balancer forwards to node ports"))
	}
	if svc.Spec.LoadBalancerIP != "" {
		errs = append(errs, errors.New("spec.loadBalancerIP: the load balancer listens on the cloudspace's external address, which cannot be chosen per Service"))
	}
	for _, p := range svc.Spec.Ports {
		if p.Protocol != corev1.ProtocolTCP && p.Protocol != corev1.ProtocolUDP && p.Protocol != "" {
			errs = append(errs, fmt.Errorf("port %s: protocol %s: the platform load balancer is TCP or UDP", portLabel(p), p.Protocol))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

func portLabel(p corev1.ServicePort) string {
	if p.Name != "" {
		return p.Name
	}
	return strconv.Itoa(int(p.Port))
}

// Listeners are the load balancers a Service needs in a cloudspace whose external address is
// ip, all forwarding to pool. A port without a nodePort yet is an error: the API server
// allocates it, so asking again later helps.
func Listeners(svc *corev1.Service, pool, poolID, ip string) ([]vco.LoadBalancerSpec, error) {
	var out []vco.LoadBalancerSpec
	for _, p := range svc.Spec.Ports {
		if p.NodePort == 0 {
			return nil, fmt.Errorf("port %s has no nodePort yet", portLabel(p))
		}
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(corev1.ProtocolTCP)
		}
		out = append(out, vco.LoadBalancerSpec{
			Name: LoadBalancerName(pool, p), Type: proto,
			Description: fmt.Sprintf("Service %s/%s port %s (capvco-cloud-controller-manager)", svc.Namespace, svc.Name, portLabel(p)),
			FrontEnd:    vco.LBFrontEnd{Port: int(p.Port), IPAddress: ip},
			BackEnd:     vco.LBBackEnd{ServerPoolID: poolID, TargetPort: int(p.NodePort)},
		})
	}
	return out, nil
}

// Update is a load balancer to rewrite in place.
type Update struct {
	ID   string
	Spec vco.LoadBalancerSpec
}

// PortDiff is how a cloudspace's load balancers of a Service must change: existing are the
// Service's load balancers as GetLoadBalancer reads them. Duplicates of a name (a create whose
// outcome was lost) are deleted, all but the first.
func PortDiff(existing []vco.LoadBalancer, want []vco.LoadBalancerSpec) (create []vco.LoadBalancerSpec, update []Update, remove []vco.LoadBalancer) {
	kept := map[string]bool{}
	for _, lb := range existing {
		i := slices.IndexFunc(want, func(w vco.LoadBalancerSpec) bool { return w.Name == lb.Name })
		if i < 0 || kept[lb.Name] {
			remove = append(remove, lb)
			continue
		}
		kept[lb.Name] = true
		if !sameListener(lb, want[i]) {
			update = append(update, Update{ID: lb.ID, Spec: want[i]})
		}
	}
	for _, w := range want {
		if !kept[w.Name] {
			create = append(create, w)
		}
	}
	return create, update, remove
}

func sameListener(lb vco.LoadBalancer, w vco.LoadBalancerSpec) bool {
	return strings.EqualFold(lb.Type, w.Type) && lb.FrontEnd.Port == w.FrontEnd.Port && lb.FrontEnd.IPAddress == w.FrontEnd.IPAddress &&
		lb.BackEnd == w.BackEnd
}

// Candidate is a node that may back a Service in a site: its pool address and whether the
// Node is Ready.
type Candidate struct {
	Node    string
	Address string
	Ready   bool
}

// toBeDeletedTaint is cluster-autoscaler's taint on a node it is removing.
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// Candidates are the nodes of a site that may back a load balancer: initialised by this CCM
// (their zone is the site), not being deleted, not excluded by the
// node.kubernetes.io/exclude-from-external-load-balancers label or being removed by
// cluster-autoscaler, and with an internal address. The service controller passes every node
// whatever its readiness; readiness decides membership, not candidacy, so a site whose nodes
// are all down keeps its load balancer and address.
func Candidates(nodes []*corev1.Node, site string) []Candidate {
	var out []Candidate
	for _, n := range nodes {
		if n.Labels[corev1.LabelTopologyZone] != site || !n.DeletionTimestamp.IsZero() || excluded(n) {
			continue
		}
		addr := internalIP(n)
		if addr == "" {
			continue
		}
		out = append(out, Candidate{Node: n.Name, Address: addr, Ready: ready(n)})
	}
	slices.SortFunc(out, func(a, b Candidate) int { return strings.Compare(a.Address, b.Address) })
	return out
}

func excluded(n *corev1.Node) bool {
	if v, ok := n.Labels[corev1.LabelNodeExcludeBalancers]; ok {
		if b, err := strconv.ParseBool(v); err != nil || b {
			return true // as the service controller: a value it cannot parse excludes
		}
	}
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == toBeDeletedTaint })
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// ProbeSet is what to probe: the Ready candidates' addresses.
func ProbeSet(cands []Candidate) []string {
	var out []string
	for _, c := range cands {
		if c.Ready {
			out = append(out, c.Address)
		}
	}
	return out
}

// HealthPort is the port a Service's members are probed on: its healthCheckNodePort with
// externalTrafficPolicy Local (kube-proxy answers 200 there only on nodes with a ready local
// endpoint), else clusterPort (kube-proxy's own health port; 0 = no probe, Ready decides).
func HealthPort(svc *corev1.Service, clusterPort int) int {
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && svc.Spec.HealthCheckNodePort != 0 {
		return int(svc.Spec.HealthCheckNodePort)
	}
	return clusterPort
}
