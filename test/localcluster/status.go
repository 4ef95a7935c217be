package localcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Status is what `hack/cluster status` reports.
type Status struct {
	Name string `json:"name"`
	// Started says whether Up ever ran for this folder (its saved layout exists).
	Started    bool           `json:"started"`
	Dir        string         `json:"dir"`
	Kubeconfig string         `json:"kubeconfig"`
	APIServer  string         `json:"apiServer"`
	NetNS      string         `json:"netns"`
	PodCIDR    string         `json:"podCIDR"`
	Service    string         `json:"serviceCIDR"`
	Isolation  string         `json:"isolation"` // "ok", or why the namespace is not isolated
	Daemons    []DaemonStatus `json:"daemons"`
	Node       NodeStatus     `json:"node"`
}

// DaemonStatus is one daemon's process state.
type DaemonStatus struct {
	Name    string `json:"name"`
	PID     int    `json:"pid,omitempty"`
	Running bool   `json:"running"`
	Log     string `json:"log"`
}

// NodeStatus is the node's readiness as the API server reports it.
type NodeStatus struct {
	Name    string `json:"name"`
	Ready   bool   `json:"ready"`
	Message string `json:"message,omitempty"`
}

// Up reports whether every daemon runs and the node is Ready.
func (s Status) Up() bool {
	for _, d := range s.Daemons {
		if !d.Running {
			return false
		}
	}
	return s.Node.Ready && s.Isolation == "ok"
}

// Status inspects the processes, the namespace and the node. It does not fail when the cluster
// is down: the Status says so.
func (c *Cluster) Status(ctx context.Context) Status {
	l := c.l
	s := Status{
		Name: l.Name, Dir: l.Dir, Kubeconfig: l.kubeconfig(), APIServer: c.APIServerURL(),
		NetNS: l.NetNS, PodCIDR: l.PodCIDR, Service: l.ServiceCIDR,
		Node:    NodeStatus{Name: l.NodeName},
		Started: exists(l.path(stateFileName)),
	}
	for _, d := range daemons {
		pid := daemonPID(l, d.name)
		s.Daemons = append(s.Daemons, DaemonStatus{Name: d.name, PID: pid, Running: pid != 0, Log: l.logFile(d.name)})
	}
	switch {
	case !exists(l.netnsPath()):
		s.Isolation = "namespace does not exist (cluster down)"
	default:
		if err := checkIsolation(ctx, l.NetNS); err != nil {
			s.Isolation = err.Error()
		} else {
			s.Isolation = "ok"
		}
	}
	s.Node.Message = "API server not reachable"
	if !s.Started || !exists(l.kubeconfig()) {
		s.Node.Message = "not started"
		return s
	}
	if client, err := c.client(); err == nil {
		node, err := client.CoreV1().Nodes().Get(ctx, l.NodeName, metav1.GetOptions{})
		if err != nil {
			s.Node.Message = err.Error()
		} else {
			s.Node.Message = "no Ready condition"
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					s.Node.Ready = cond.Status == corev1.ConditionTrue
					s.Node.Message = fmt.Sprintf("%s: %s", cond.Reason, cond.Message)
				}
			}
		}
	}
	return s
}
