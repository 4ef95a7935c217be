package vcosim

import (
	"net"
	"strconv"
	"strings"
)

// The simulator's load balancers are records: nothing listens on their front ends. These
// read what a harness needs to carry their traffic (test/localcluster's platform network does,
// for TCP): where each one listens and which pool members it forwards to.

// LBFront is an address and port a TCP load balancer listens on.
type LBFront struct {
	IP   string
	Port int
}

// String is ip:port.
func (f LBFront) String() string { return net.JoinHostPort(f.IP, strconv.Itoa(f.Port)) }

// TCPLoadBalancerFronts lists where the TCP load balancers of live cloudspaces listen, in a
// stable order. A load balancer without a front-end address listens on every external address
// of its cloudspace, as on the platform.
func (s *Sim) TCPLoadBalancerFronts() []LBFront {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LBFront
	for _, lb := range sortedValues(s.st.LoadBalancers) {
		for _, ip := range s.frontIPs(lb) {
			out = append(out, LBFront{IP: ip, Port: lb.FrontPort})
		}
	}
	return out
}

// TCPLoadBalancerBackends returns the host:port addresses the TCP load balancer listening on
// front forwards to (its pool's members at its target port, in pool order), and whether one
// listens there. An empty pool listens and forwards nowhere.
func (s *Sim) TCPLoadBalancerBackends(front LBFront) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, lb := range sortedValues(s.st.LoadBalancers) {
		if lb.FrontPort != front.Port {
			continue
		}
		for _, ip := range s.frontIPs(lb) {
			if ip != front.IP {
				continue
			}
			var out []string
			if p := s.st.ServerPools[lb.PoolID]; p != nil {
				for _, h := range p.Hosts {
					out = append(out, net.JoinHostPort(h.Address, strconv.Itoa(lb.TargetPort)))
				}
			}
			return out, true
		}
	}
	return nil, false
}

// frontIPs are the addresses a TCP load balancer listens on (none for UDP, or when its
// cloudspace is not live); callers hold s.mu.
func (s *Sim) frontIPs(lb *LoadBalancer) []string {
	cs := s.st.Cloudspaces[lb.CloudspaceID]
	if !strings.EqualFold(lb.Type, "TCP") || cs == nil || cs.Status == statusDestroyed || cs.Status == statusDeleted {
		return nil
	}
	if lb.FrontIP != "" {
		return []string{lb.FrontIP}
	}
	var out []string
	for _, ip := range cs.PublicIPs {
		out = append(out, ip.IP)
	}
	return out
}
