package outputs

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/state"
)

// canary stands for a secret inside an output value: no message may ever show it.
const canary = "s3cr3t-canary"

// outs builds state outputs from name → JSON value, all sensitive as the generated root marks
// them.
func outs(values map[string]string) map[string]state.Output {
	m := make(map[string]state.Output, len(values))
	for k, v := range values {
		m[k] = state.Output{Value: json.RawMessage(v), Sensitive: true}
	}
	return m
}

// with returns a role's valid outputs with some replaced ("-" removes one).
func with(role contract.Role, changes map[string]string) map[string]state.Output {
	base := map[contract.Role]map[string]string{
		contract.RoleCluster: {
			"health":                 `{"state":"running","healthy":true}`,
			"control_plane_endpoint": `{"host":"10.0.0.10","port":6443}`,
			"failure_domains":        `[]`,
			"exports":                `{}`,
		},
		contract.RoleMachine: {
			"health":         `{"state":"running","healthy":true}`,
			"provider_id":    `"vco://m-1"`,
			"addresses":      `[]`,
			"failure_domain": `null`,
		},
		contract.RoleMachinePool: {
			"health":           `{"state":"running","healthy":true}`,
			"provider_id":      `null`,
			"provider_id_list": `[]`,
			"replicas":         `0`,
			"instances":        `[]`,
		},
	}[role]
	values := map[string]string{}
	for k, v := range base {
		values[k] = v
	}
	for k, v := range changes {
		if v == "-" {
			delete(values, k)
			continue
		}
		values[k] = v
	}
	return outs(values)
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		role    contract.Role
		outs    map[string]state.Output
		opts    Options
		status  Status
		message string // part of Message() for a status other than Valid
		check   func(g *WithT, r *Result)
	}{
		// common
		{name: "health", role: contract.RoleMachine,
			outs: with(contract.RoleMachine, map[string]string{"health": `{"state":"degraded","healthy":false,"message":"disk full","reasons":["x"]}`}),
			check: func(g *WithT, r *Result) {
				g.Expect(r.Health).To(Equal(&captfv1.Health{State: "degraded", Healthy: false, Message: "disk full"}))
			}},
		{name: "null health is no problem", role: contract.RoleMachine, outs: with(contract.RoleMachine, map[string]string{"health": `null`}),
			check: func(g *WithT, r *Result) { g.Expect(r.Health).To(BeNil()) }},
		{name: "health state outside the enum", role: contract.RoleMachine,
			outs:   with(contract.RoleMachine, map[string]string{"health": `{"state":"` + canary + `","healthy":true}`}),
			status: Invalid, message: `output "health" at .state must be one of pending, running, degraded, stopped, terminated, unknown`},
		{name: "health without healthy", role: contract.RoleMachine, outs: with(contract.RoleMachine, map[string]string{"health": `{"state":"running"}`}),
			status: Invalid, message: `output "health" at .healthy is missing; it must be true or false`},
		{name: "healthy as a string", role: contract.RoleMachine, outs: with(contract.RoleMachine, map[string]string{"health": `{"state":"running","healthy":"true"}`}),
			status: Invalid, message: `at .healthy must be true or false, not a string`},
		{name: "health as a list", role: contract.RoleMachine, outs: with(contract.RoleMachine, map[string]string{"health": `["running"]`}),
			status: Invalid, message: `output "health" must be an object {state, healthy, message}, not a list`},
		{name: "long health message is cut", role: contract.RoleMachine,
			outs: with(contract.RoleMachine, map[string]string{"health": `{"state":"running","healthy":true,"message":"` + strings.Repeat("é", 600) + `"}`}),
			check: func(g *WithT, r *Result) {
				g.Expect(len(r.Health.Message)).To(BeNumerically("<=", 1024))
				g.Expect(r.Health.Message).To(HaveSuffix("é..."))
			}},
		// The runtimes leave null root outputs out of the state: absent is null.
		{name: "absent optional output is null", role: contract.RoleCluster, outs: with(contract.RoleCluster, map[string]string{"exports": "-"}),
			status: Valid, check: func(g *WithT, r *Result) { g.Expect(r.Exports).To(BeNil()) }},
		{name: "absent required output is pending", role: contract.RoleMachine,
			outs:   with(contract.RoleMachine, map[string]string{"provider_id": "-", "failure_domain": "-"}),
			status: Pending, message: `output "provider_id" is still null`,
			check: func(g *WithT, r *Result) { g.Expect(r.Problems).To(HaveLen(1)) }},
		{name: "invalid wins over pending", role: contract.RoleMachine,
			outs:   with(contract.RoleMachine, map[string]string{"addresses": "-", "health": `1`, "provider_id": `null`}),
			status: Invalid, message: `"health"`,
			check: func(g *WithT, r *Result) { g.Expect(r.Problems).To(HaveLen(2)) }},
		{name: "outputs outside the contract are ignored", role: contract.RoleMachine,
			outs: func() map[string]state.Output {
				o := with(contract.RoleMachine, nil)
				o["admin_password"] = state.Output{Value: json.RawMessage(`{"x":1}`), Sensitive: true}
				return o
			}()},
		{name: "not JSON", role: contract.RoleMachine, outs: with(contract.RoleMachine, map[string]string{"addresses": `[`}),
			status: Invalid, message: `output "addresses" is not valid JSON`},
		{name: "unknown role", role: "router", outs: nil, status: Invalid, message: `"router" is not a module role`},

		// cluster
		{name: "cluster", role: contract.RoleCluster, outs: with(contract.RoleCluster, map[string]string{
			"failure_domains": `[{"name":"a","attributes":{"zone":"a"}},{"name":"b","control_plane":false,"attributes":{}},{"name":"c","control_plane":null,"attributes":null}]`,
			"exports":         `{"network":{"id":"n-1"},"cidr":"10.0.0.0/16"}`,
		}), check: func(g *WithT, r *Result) {
			g.Expect(r.ControlPlaneEndpoint).To(Equal(&clusterv1.APIEndpoint{Host: "10.0.0.10", Port: 6443}))
			g.Expect(r.FailureDomains).To(Equal([]clusterv1.FailureDomain{
				{Name: "a", ControlPlane: ptr.To(true), Attributes: map[string]string{"zone": "a"}},
				{Name: "b", ControlPlane: ptr.To(false)},
				{Name: "c", ControlPlane: ptr.To(true)},
			}))
			g.Expect(string(r.Exports)).To(MatchJSON(`{"network":{"id":"n-1"},"cidr":"10.0.0.0/16"}`))
			g.Expect(r.ExportsBytes).To(Equal(len(r.Exports)))
		}},
		{name: "exports may be anything", role: contract.RoleCluster, outs: with(contract.RoleCluster, map[string]string{"exports": `"x"`}),
			check: func(g *WithT, r *Result) { g.Expect(r.ExportsBytes).To(Equal(3)) }},
		{name: "null exports", role: contract.RoleCluster, outs: with(contract.RoleCluster, map[string]string{"exports": `null`}),
			check: func(g *WithT, r *Result) { g.Expect(r.Exports).To(BeNil()) }},
		{name: "null endpoint is pending", role: contract.RoleCluster, outs: with(contract.RoleCluster, map[string]string{"control_plane_endpoint": `null`}),
			status: Pending, message: `output "control_plane_endpoint" is still null`},
		{name: "empty endpoint is pending", role: contract.RoleCluster, outs: with(contract.RoleCluster, map[string]string{"control_plane_endpoint": `{"host":"","port":0}`}),
			status: Pending},
		{name: "null endpoint set by the user", role: contract.RoleCluster, opts: Options{EndpointFromUser: true},
			outs:  with(contract.RoleCluster, map[string]string{"control_plane_endpoint": `{"host":null,"port":null}`}),
			check: func(g *WithT, r *Result) { g.Expect(r.ControlPlaneEndpoint).To(BeNil()) }},
		{name: "endpoint without port", role: contract.RoleCluster, outs: with(contract.RoleCluster, map[string]string{"control_plane_endpoint": `{"host":"` + canary + `"}`}),
			status: Invalid, message: `output "control_plane_endpoint" sets host but not port`},
		{name: "endpoint without host", role: contract.RoleCluster, outs: with(contract.RoleCluster, map[string]string{"control_plane_endpoint": `{"host":"","port":6443}`}),
			status: Invalid, message: `sets port but not host`},
		{name: "endpoint port out of range", role: contract.RoleCluster, outs: with(contract.RoleCluster, map[string]string{"control_plane_endpoint": `{"host":"h","port":70000}`}),
			status: Invalid, message: `at .port must be a port number`},
		{name: "endpoint port as text", role: contract.RoleCluster, outs: with(contract.RoleCluster, map[string]string{"control_plane_endpoint": `{"host":"h","port":"6443"}`}),
			status: Invalid, message: `at .port must be a whole number from 0 to 2147483647, not a string`},
		{name: "failure domains as a map", role: contract.RoleCluster, outs: with(contract.RoleCluster, map[string]string{"failure_domains": `{"a":{}}`}),
			status: Invalid, message: `output "failure_domains" must be a list of {name, control_plane, attributes}, not an object`},
		{name: "failure domain without a name", role: contract.RoleCluster, outs: with(contract.RoleCluster, map[string]string{"failure_domains": `[{"name":"a"},{"attributes":{}}]`}),
			status: Invalid, message: `at [1].name must be a non-empty string`},
		{name: "failure domain names repeat", role: contract.RoleCluster, outs: with(contract.RoleCluster, map[string]string{"failure_domains": `[{"name":"a"},{"name":"a"}]`}),
			status: Invalid, message: `at [1].name repeats`},
		{name: "failure domain attribute not a string", role: contract.RoleCluster, outs: with(contract.RoleCluster, map[string]string{"failure_domains": `[{"name":"a","attributes":{"n":1}}]`}),
			status: Invalid, message: `at [0].attributes must be a map of strings`},
		{name: "too many failure domains", role: contract.RoleCluster, outs: with(contract.RoleCluster, map[string]string{"failure_domains": list(101, `{"name":"fd-%d"}`)}),
			status: Invalid, message: `lists 101 failure domains, more than the 100`},

		// machine
		{name: "machine", role: contract.RoleMachine, outs: with(contract.RoleMachine, map[string]string{
			"addresses": `[{"type":"Hostname","address":"m-1"},{"type":"ExternalIP","address":"203.0.113.9"},{"type":"InternalIP","address":"10.0.0.9"},
				{"type":"InternalIP","address":"10.0.0.10"},{"type":"InternalDNS","address":"m-1.internal"},{"type":"ExternalDNS","address":"m-1.example.com"},
				{"type":"InternalIP","address":"10.0.0.9"}]`,
			"failure_domain": `"a"`,
		}), check: func(g *WithT, r *Result) {
			g.Expect(r.ProviderID).To(Equal("vco://m-1"))
			g.Expect(r.FailureDomain).To(Equal("a"))
			g.Expect(r.Addresses).To(Equal([]clusterv1.MachineAddress{
				{Type: clusterv1.MachineInternalIP, Address: "10.0.0.10"},
				{Type: clusterv1.MachineInternalIP, Address: "10.0.0.9"},
				{Type: clusterv1.MachineInternalDNS, Address: "m-1.internal"},
				{Type: clusterv1.MachineExternalIP, Address: "203.0.113.9"},
				{Type: clusterv1.MachineExternalDNS, Address: "m-1.example.com"},
				{Type: clusterv1.MachineHostName, Address: "m-1"},
			}))
		}},
		{name: "null provider ID is pending", role: contract.RoleMachine, outs: with(contract.RoleMachine, map[string]string{"provider_id": `null`}),
			status: Pending, message: `output "provider_id" is still null`},
		{name: "provider ID as a number", role: contract.RoleMachine, outs: with(contract.RoleMachine, map[string]string{"provider_id": `12345678`}),
			status: Invalid, message: `output "provider_id" must be a string, not a number (or null)`},
		{name: "unknown address type", role: contract.RoleMachine, outs: with(contract.RoleMachine, map[string]string{"addresses": `[{"type":"` + canary + `","address":"` + canary + `"}]`}),
			status: Invalid, message: `output "addresses" at [0].type must be one of InternalIP, InternalDNS, ExternalIP, ExternalDNS, Hostname`},
		{name: "empty address", role: contract.RoleMachine, outs: with(contract.RoleMachine, map[string]string{"addresses": `[{"type":"InternalIP","address":""}]`}),
			status: Invalid, message: `at [0].address must be a non-empty string`},
		{name: "null addresses", role: contract.RoleMachine, outs: with(contract.RoleMachine, map[string]string{"addresses": `null`}),
			check: func(g *WithT, r *Result) { g.Expect(r.Addresses).To(BeNil()) }},
		{name: "failure domain as a list", role: contract.RoleMachine, outs: with(contract.RoleMachine, map[string]string{"failure_domain": `["a"]`}),
			status: Invalid, message: `output "failure_domain" must be a string, not a list (or null)`},

		// machine pool
		{name: "pool", role: contract.RoleMachinePool, outs: with(contract.RoleMachinePool, map[string]string{
			"provider_id":      `"vco://pool/p-1"`,
			"provider_id_list": `["vco://m-2","vco://m-1","vco://m-2"]`,
			"replicas":         `3.0`,
			"instances": `[{"provider_id":"vco://m-2","instance_id":"m-2","state":"running","addresses":[{"type":"Hostname","address":"m-2"},{"type":"InternalIP","address":"10.0.0.2"}]},
				{"provider_id":"vco://m-1","failure_domain":"a"},{"provider_id":null,"instance_id":"m-3","state":"pending"}]`,
		}), check: func(g *WithT, r *Result) {
			g.Expect(r.ProviderID).To(Equal("vco://pool/p-1"))
			g.Expect(r.ProviderIDList).To(Equal([]string{"vco://m-1", "vco://m-2"}))
			g.Expect(r.Replicas).To(Equal(ptr.To[int32](3)))
			g.Expect(r.Instances).To(Equal([]captfv1.MachinePoolInstance{
				{InstanceName: "m-3", State: "pending"},
				{ProviderID: "vco://m-1", FailureDomain: "a"},
				{ProviderID: "vco://m-2", InstanceName: "m-2", State: "running", Addresses: []clusterv1.MachineAddress{
					{Type: clusterv1.MachineInternalIP, Address: "10.0.0.2"}, {Type: clusterv1.MachineHostName, Address: "m-2"},
				}},
			}))
			g.Expect(r.InstancesTotal).To(Equal(3))
			g.Expect(r.InstancesTruncated).To(BeFalse())
		}},
		{name: "null replicas and list are pending", role: contract.RoleMachinePool,
			outs:   with(contract.RoleMachinePool, map[string]string{"replicas": `null`, "provider_id_list": `null`}),
			status: Pending, message: `output "provider_id_list" is still null; output "replicas" is still null`},
		{name: "fractional replicas", role: contract.RoleMachinePool, outs: with(contract.RoleMachinePool, map[string]string{"replicas": `2.5`}),
			status: Invalid, message: `output "replicas" must be a whole number from 0 to 2147483647`},
		{name: "negative replicas", role: contract.RoleMachinePool, outs: with(contract.RoleMachinePool, map[string]string{"replicas": `-1`}),
			status: Invalid, message: `must be a whole number from 0 to 2147483647`},
		{name: "replicas as text", role: contract.RoleMachinePool, outs: with(contract.RoleMachinePool, map[string]string{"replicas": `"3"`}),
			status: Invalid, message: `output "replicas" must be a whole number from 0 to 2147483647, not a string`},
		{name: "empty provider ID in the list", role: contract.RoleMachinePool, outs: with(contract.RoleMachinePool, map[string]string{"provider_id_list": `["a",""]`}),
			status: Invalid, message: `output "provider_id_list" at [1] must be a non-empty string`},
		{name: "instance state as a number", role: contract.RoleMachinePool, outs: with(contract.RoleMachinePool, map[string]string{"instances": `[{"provider_id":"a","state":1}]`}),
			status: Invalid, message: `output "instances" at [0].state must be a string, not a number (or null)`},
		{name: "instance with too many addresses", role: contract.RoleMachinePool,
			outs:   with(contract.RoleMachinePool, map[string]string{"instances": `[{"provider_id":"a","addresses":` + list(17, `{"type":"InternalIP","address":"10.0.0.%d"}`) + `}]`}),
			status: Invalid, message: `output "instances" at [0].addresses lists 17 addresses, more than 16`},
		{name: "instances truncated", role: contract.RoleMachinePool,
			outs: with(contract.RoleMachinePool, map[string]string{"instances": list(1205, `{"provider_id":"vco://m-%04d"}`)}),
			check: func(g *WithT, r *Result) {
				g.Expect(r.Instances).To(HaveLen(MaxInstances))
				g.Expect(r.InstancesTotal).To(Equal(1205))
				g.Expect(r.InstancesTruncated).To(BeTrue())
				g.Expect(r.Instances[0].ProviderID).To(Equal("vco://m-0000"))
				g.Expect(r.Instances[999].ProviderID).To(Equal("vco://m-0999"))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := Decode(tt.role, tt.outs, tt.opts)
			want := tt.status
			if want == "" {
				want = Valid
			}
			g.Expect(r.Status()).To(Equal(want), "%v", r.Problems)
			g.Expect(r.Message()).NotTo(ContainSubstring(canary))
			switch want {
			case Valid:
				g.Expect(r.Reason()).To(Equal(captfv1.OutputsValidReason))
				g.Expect(r.Err()).NotTo(HaveOccurred())
			case Pending:
				g.Expect(r.Reason()).To(Equal(captfv1.OutputsPendingReason))
				g.Expect(r.Err()).NotTo(HaveOccurred())
			case Invalid:
				g.Expect(r.Reason()).To(Equal(captfv1.OutputsInvalidReason))
				g.Expect(r.Err()).To(MatchError(ContainSubstring("outputs: invalid: ")))
			}
			if tt.message != "" {
				g.Expect(r.Message()).To(ContainSubstring(tt.message))
			}
			if tt.check != nil {
				tt.check(g, r)
			}
		})
	}
}

// TestDecodeFixture decodes the outputs of a state OpenTofu wrote (testdata of package state).
func TestDecodeFixture(t *testing.T) {
	g := NewWithT(t)
	s := fixtureSnapshot(t, "single")
	r := Decode(contract.RoleCluster, s.Outputs, Options{})
	g.Expect(r.Status()).To(Equal(Valid), r.Message())
	g.Expect(r.Health).To(Equal(&captfv1.Health{State: "running", Healthy: true, Message: "all nodes up"}))
	g.Expect(r.ControlPlaneEndpoint).To(Equal(&clusterv1.APIEndpoint{Host: "10.0.0.10", Port: 6443}))
	g.Expect(r.FailureDomains).To(Equal([]clusterv1.FailureDomain{
		{Name: "a", ControlPlane: ptr.To(true), Attributes: map[string]string{"zone": "a"}},
		{Name: "b", ControlPlane: ptr.To(true)},
	}))
	g.Expect(string(r.Exports)).To(ContainSubstring(`"nodes":["node-0","node-1","node-2"]`))

	// The same state read as a machine's lacks the machine outputs: they read as null.
	m := Decode(contract.RoleMachine, s.Outputs, Options{})
	g.Expect(m.Status()).To(Equal(Pending))
	g.Expect(m.Message()).To(ContainSubstring(`"provider_id"`))
	g.Expect(m.Health).NotTo(BeNil(), "health still decodes")
}

func list(n int, format string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(format, i)
	}
	return "[" + strings.Join(items, ",") + "]"
}

// TestStatusExportsHoldNoValues: status.exports lists the export keys, never a value (the
// exports output is sensitive and may hold credentials).
func TestStatusExportsHoldNoValues(t *testing.T) {
	g := NewWithT(t)
	decode := func(exports string) *Result {
		return Decode(contract.RoleCluster, map[string]state.Output{
			"control_plane_endpoint": {Value: []byte(`{"host":"h","port":6443}`)},
			"exports":                {Value: []byte(exports)},
		}, Options{})
	}
	r := decode(`{"network_id":"n-1","join_token":"abcdef.0123456789abcdef","kubeconfig":{"users":[{"token":"t0k3n"}]}}`)
	g.Expect(r.Status()).To(Equal(Valid))
	st := r.StatusExports()
	g.Expect(st).NotTo(BeNil())
	g.Expect(string(st.Raw)).To(Equal(`["join_token","kubeconfig","network_id"]`))
	g.Expect(string(r.Exports)).To(ContainSubstring("abcdef.0123456789abcdef"), "the machines' inputs still get the values")

	g.Expect(decode(`"a-secret-string"`).StatusExports()).To(BeNil(), "not an object: nothing to list")
	g.Expect(decode(`null`).StatusExports()).To(BeNil())
	many := map[string]int{}
	for i := range 2 * MaxExportKeys {
		many[fmt.Sprintf("k%03d", i)] = i
	}
	b, _ := json.Marshal(many)
	var keys []string
	g.Expect(json.Unmarshal(decode(string(b)).StatusExports().Raw, &keys)).To(Succeed())
	g.Expect(keys).To(HaveLen(MaxExportKeys))
	g.Expect(keys[0]).To(Equal("k000"))
}
