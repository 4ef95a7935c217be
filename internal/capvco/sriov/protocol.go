// Package sriov is the SR-IOV agent of CAPVCO workload clusters: a node agent that attaches a
// NIC to its node's VM through the whitesky.cloud API when a Pod asks for one, and the CNI
// plugin (package cni) that the container runtime calls for that Pod and that moves the new
// interface into the Pod's network namespace.
//
// The agent holds the operator-supplied credential of spec.sriov.credentialSecretRef; the
// plugin holds none and asks the agent over a unix socket. The agent identifies the NIC it
// attached by the MAC the API reports for it (the NIC that appeared in the VM's list across
// the attach), never by driver or interface name.
package sriov

// DefaultSocket is where the agent listens, on the node.
const DefaultSocket = "/run/capvco-sriov/agent.sock"

// Namespace is the workload cluster namespace the agent runs in, apart from tenant workloads.
const Namespace = "whitesky-sriov-cni"

// AttachRequest asks for a NIC for one interface of one container (a CNI ADD).
type AttachRequest struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
	// NetworkID is the external network the NIC is on (the CNI config's networkID).
	NetworkID int `json:"networkID"`
	// Model is the NIC model ("" = the platform's default).
	Model string `json:"model,omitempty"`
}

// Key names the attachment: CNI identifies an attachment by container and interface.
func (r AttachRequest) Key() AttachmentKey {
	return AttachmentKey{ContainerID: r.ContainerID, IfName: r.IfName}
}

// AttachmentKey identifies an attachment.
type AttachmentKey struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
}

// Attachment is a NIC the agent attached for a container's interface.
type Attachment struct {
	AttachmentKey
	MAC       string `json:"mac"`
	IP        string `json:"ip"`
	NetworkID int    `json:"networkID"`
}
