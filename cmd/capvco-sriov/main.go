// Command capvco-sriov is the CNI plugin of the SR-IOV add-on (its CNI type):
// internal/capvco/sriov/cni. The container runtime runs it; it talks to capvco-sriov-agent.
package main

import "github.com/capx-io/capx/internal/capvco/sriov/cni"

func main() { cni.Main() }
