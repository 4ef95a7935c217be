package inputs

import (
	"bytes"
	"encoding/json"
	"testing"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capx-io/capx/internal/captf/contract"
)

// contractCase is one documented value of one contract input (docs/captf/module-contract.md,
// "Inputs"): what a module written for the public CAPTF project receives, byte for byte.
type contractCase struct {
	role   contract.Role
	input  string
	name   string
	change func(*Source)
	want   string // compact JSON, keys sorted
}

func contractCases() []contractCase {
	none := func(*Source) {}
	cases := []contractCase{}
	for _, role := range []contract.Role{contract.RoleCluster, contract.RoleMachine, contract.RoleMachinePool} {
		kind := map[contract.Role]string{
			contract.RoleCluster: "TerraformCluster", contract.RoleMachine: "TerraformMachine", contract.RoleMachinePool: "TerraformMachinePool",
		}[role]
		name := sources()[role].Owner.Name
		cases = append(cases,
			contractCase{role, "captf_contract", "the contract version", none, `"v1alpha1"`},
			contractCase{role, "captf_cluster", "the CAPI Cluster", none, `{"name":"c1","namespace":"ns1"}`},
			contractCase{role, "captf_object", "the CAPTF object", none, `{"kind":"` + kind + `","name":"` + name + `","namespace":"ns1"}`},
			contractCase{role, "captf_tags", "tags without a template", func(s *Source) { s.Object = object(nil) },
				`{"captf.io/cluster":"c1","captf.io/kind":"` + kind + `","captf.io/managed-by":"captf","captf.io/name":"` + name +
					`","captf.io/namespace":"ns1","captf.io/template":""}`},
			contractCase{role, "captf_tags", "tags of a cloned object", func(s *Source) {
				s.Object = object(map[string]string{clusterv1.TemplateClonedFromNameAnnotation: "tmpl"})
			}, `{"captf.io/cluster":"c1","captf.io/kind":"` + kind + `","captf.io/managed-by":"captf","captf.io/name":"` + name +
				`","captf.io/namespace":"ns1","captf.io/template":"tmpl"}`},
		)
		if role != contract.RoleCluster {
			cases = append(cases,
				contractCase{role, "captf_cluster_outputs", "no TerraformCluster", func(s *Source) { s.ClusterOutputs = nil }, `{}`},
				contractCase{role, "captf_cluster_outputs", "the cluster's exports", func(s *Source) {
					s.ClusterOutputs = raw(`{ "z": [1, 2], "a": {"k": "v"} }`)
				}, `{"a":{"k":"v"},"z":[1,2]}`},
			)
		}
	}
	port := int32(6443)
	domain := "cluster.local"
	cluster := func(f func(*ClusterInputs)) func(*Source) { return func(s *Source) { f(s.Cluster) } }
	machine := func(f func(*MachineInputs)) func(*Source) { return func(s *Source) { f(s.Machine) } }
	pool := func(f func(*MachinePoolInputs)) func(*Source) { return func(s *Source) { f(s.MachinePool) } }
	c, m, p := contract.RoleCluster, contract.RoleMachine, contract.RoleMachinePool
	return append(cases,
		contractCase{c, "control_plane_endpoint", "not set", cluster(func(i *ClusterInputs) { i.ControlPlaneEndpoint = nil }), `null`},
		contractCase{c, "control_plane_endpoint", "set", cluster(func(i *ClusterInputs) {
			i.ControlPlaneEndpoint = &Endpoint{Host: "api.example", Port: 443}
		}), `{"host":"api.example","port":443}`},
		contractCase{c, "kubernetes_version", "no topology", cluster(func(i *ClusterInputs) { i.KubernetesVersion = "" }), `null`},
		contractCase{c, "kubernetes_version", "topology version", cluster(func(i *ClusterInputs) { i.KubernetesVersion = "v1.36.3" }), `"v1.36.3"`},
		contractCase{c, "control_plane_initialized", "not yet", cluster(func(i *ClusterInputs) { i.ControlPlaneInitialized = false }), `false`},
		contractCase{c, "control_plane_initialized", "latched", cluster(func(i *ClusterInputs) { i.ControlPlaneInitialized = true }), `true`},
		contractCase{c, "cluster_network", "empty", cluster(func(i *ClusterInputs) { i.ClusterNetwork = ClusterNetworkOf(clusterv1.ClusterNetwork{}) }), `null`},
		contractCase{c, "cluster_network", "partly set", cluster(func(i *ClusterInputs) {
			i.ClusterNetwork = ClusterNetworkOf(clusterv1.ClusterNetwork{Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}}})
		}), `{"api_server_port":null,"pods":null,"service_domain":null,"services":["10.96.0.0/12"]}`},
		contractCase{c, "cluster_network", "fully set", cluster(func(i *ClusterInputs) {
			i.ClusterNetwork = &ClusterNetwork{Pods: []string{"192.168.0.0/16"}, Services: []string{"10.96.0.0/12"}, ServiceDomain: &domain, APIServerPort: &port}
		}), `{"api_server_port":6443,"pods":["192.168.0.0/16"],"service_domain":"cluster.local","services":["10.96.0.0/12"]}`},

		contractCase{m, "machine_name", "the Machine's name", none, `"c1-md-0-x7k2p-abcde"`},
		contractCase{m, "bootstrap_data", "always base64", machine(func(i *MachineInputs) { i.BootstrapData = []byte("#cloud-config\n") }), `"I2Nsb3VkLWNvbmZpZwo="`},
		contractCase{m, "bootstrap_format", "default", machine(func(i *MachineInputs) { i.BootstrapFormat = "" }), `"cloud-config"`},
		contractCase{m, "bootstrap_format", "ignition", machine(func(i *MachineInputs) { i.BootstrapFormat = "ignition" }), `"ignition"`},
		contractCase{m, "failure_domain", "none", machine(func(i *MachineInputs) { i.FailureDomain = "" }), `null`},
		contractCase{m, "failure_domain", "asked for", machine(func(i *MachineInputs) { i.FailureDomain = "fd-a" }), `"fd-a"`},
		contractCase{m, "kubernetes_version", "none", machine(func(i *MachineInputs) { i.KubernetesVersion = "" }), `null`},
		contractCase{m, "kubernetes_version", "verbatim", machine(func(i *MachineInputs) { i.KubernetesVersion = "v1.36.3+rke2r1" }), `"v1.36.3+rke2r1"`},
		contractCase{m, "control_plane", "worker", machine(func(i *MachineInputs) { i.ControlPlane = false }), `false`},
		contractCase{m, "control_plane", "control plane", machine(func(i *MachineInputs) { i.ControlPlane = true }), `true`},

		contractCase{p, "machinepool_name", "the MachinePool's name", none, `"c1-pool"`},
		contractCase{p, "replicas", "desired", pool(func(i *MachinePoolInputs) { i.Replicas = 3 }), `3`},
		contractCase{p, "replicas", "zero", pool(func(i *MachinePoolInputs) { i.Replicas = 0 }), `0`},
		contractCase{p, "bootstrap_data", "always base64", pool(func(i *MachinePoolInputs) { i.BootstrapData = []byte(`{"ignition":{}}`) }), `"eyJpZ25pdGlvbiI6e319"`},
		contractCase{p, "bootstrap_format", "default", pool(func(i *MachinePoolInputs) { i.BootstrapFormat = "" }), `"cloud-config"`},
		contractCase{p, "bootstrap_format", "ignition", pool(func(i *MachinePoolInputs) { i.BootstrapFormat = "ignition" }), `"ignition"`},
		contractCase{p, "failure_domains", "none", pool(func(i *MachinePoolInputs) { i.FailureDomains = nil }), `[]`},
		contractCase{p, "failure_domains", "asked for", pool(func(i *MachinePoolInputs) { i.FailureDomains = []string{"fd-b", "fd-a"} }), `["fd-b","fd-a"]`},
		contractCase{p, "cluster_failure_domains", "none", pool(func(i *MachinePoolInputs) { i.ClusterFailureDomains = nil }), `[]`},
		contractCase{p, "cluster_failure_domains", "from the cluster's state", pool(func(i *MachinePoolInputs) {
			i.ClusterFailureDomains = []string{"fd-a", "fd-b"}
		}), `["fd-a","fd-b"]`},
		contractCase{p, "kubernetes_version", "none", pool(func(i *MachinePoolInputs) { i.KubernetesVersion = "" }), `null`},
		contractCase{p, "kubernetes_version", "verbatim", pool(func(i *MachinePoolInputs) { i.KubernetesVersion = "v1.36.3+k3s1" }), `"v1.36.3+k3s1"`},
		contractCase{p, "node_labels", "none", pool(func(i *MachinePoolInputs) { i.NodeLabels = nil }), `{}`},
		contractCase{p, "node_labels", "template labels", pool(func(i *MachinePoolInputs) { i.NodeLabels = map[string]string{"b": "2", "a": "1"} }), `{"a":"1","b":"2"}`},
		contractCase{p, "autoscaling", "off", pool(func(i *MachinePoolInputs) { i.Autoscaling = nil }), `{"enabled":false,"max":0,"min":0}`},
		contractCase{p, "autoscaling", "on", pool(func(i *MachinePoolInputs) { i.Autoscaling = &Autoscaling{Enabled: true, Min: 1, Max: 5} }), `{"enabled":true,"max":5,"min":1}`},
		contractCase{p, "current_instances", "before the first apply", pool(func(i *MachinePoolInputs) { i.CurrentInstances = nil }), `[]`},
		contractCase{p, "current_instances", "the last instances output", pool(func(i *MachinePoolInputs) { i.CurrentInstances = []string{"p-0", "p-1"} }), `["p-0","p-1"]`},
		contractCase{p, "instances_to_remove", "none", pool(func(i *MachinePoolInputs) { i.InstancesToRemove = nil }), `[]`},
		contractCase{p, "instances_to_remove", "a Machine deleted", pool(func(i *MachinePoolInputs) { i.InstancesToRemove = []string{"p-1"} }), `["p-1"]`},
	)
}

// TestRenderEveryContractInput renders each documented value of each contract input of each
// role and compares it with what the contract gives a module.
func TestRenderEveryContractInput(t *testing.T) {
	covered := map[contract.Role]map[string]bool{}
	for _, tc := range contractCases() {
		if covered[tc.role] == nil {
			covered[tc.role] = map[string]bool{}
		}
		covered[tc.role][tc.input] = true
		t.Run(string(tc.role)+"/"+tc.input+"/"+tc.name, func(t *testing.T) {
			src := sources()[tc.role]
			tc.change(&src)
			r, err := Render(src)
			if err != nil {
				t.Fatal(err)
			}
			var vars map[string]json.RawMessage
			if err := json.Unmarshal(r.TFVars, &vars); err != nil {
				t.Fatal(err)
			}
			v, ok := vars[tc.input]
			if !ok {
				t.Fatalf("%s is not rendered", tc.input)
			}
			var got bytes.Buffer
			if err := json.Compact(&got, v); err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want {
				t.Errorf("%s renders %s, the contract gives %s", tc.input, got.String(), tc.want)
			}
		})
	}
	// Every input of every role has its row: a new contract input cannot go untested.
	for _, role := range []contract.Role{contract.RoleCluster, contract.RoleMachine, contract.RoleMachinePool} {
		for _, in := range append(commonInputs(role), contract.RoleInputs[role]...) {
			if !covered[role][in] {
				t.Errorf("the %s role's input %s has no case", role, in)
			}
		}
	}
}

// TestClusterRoleGetsNoClusterOutputs: the cluster role never receives captf_cluster_outputs.
func TestClusterRoleGetsNoClusterOutputs(t *testing.T) {
	r, err := Render(sources()[contract.RoleCluster])
	if err != nil {
		t.Fatal(err)
	}
	var vars map[string]json.RawMessage
	if err := json.Unmarshal(r.TFVars, &vars); err != nil {
		t.Fatal(err)
	}
	if _, ok := vars[contract.InputClusterOutputs]; ok {
		t.Errorf("the cluster role received %s", contract.InputClusterOutputs)
	}
}
