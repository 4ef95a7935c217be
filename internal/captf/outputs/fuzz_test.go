package outputs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/state"
)

// fixtureSnapshot reads a state that OpenTofu wrote, from package state's frozen fixtures.
func fixtureSnapshot(t testing.TB, name string) *state.Snapshot {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "state", "testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Suffix  string          `json:"suffix"`
		Secrets []corev1.Secret `json:"secrets"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	s, err := state.Decode(f.Secrets, f.Suffix)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var roles = []contract.Role{contract.RoleCluster, contract.RoleMachine, contract.RoleMachinePool}

// FuzzOutputs feeds Decode arbitrary outputs: a JSON object of output name to value, decoded
// for the role picked by role%3 (role&4 sets EndpointFromUser). Seeds are the outputs of the
// captured states and valid outputs of every role.
//
//	go test ./internal/captf/outputs -run '^$' -fuzz FuzzOutputs -fuzztime 5m -fuzzminimizetime 10x
func FuzzOutputs(f *testing.F) {
	for _, name := range []string{"single", "relabeled", "chunked-small"} {
		s := fixtureSnapshot(f, name)
		values := map[string]json.RawMessage{}
		for k, o := range s.Outputs {
			values[k] = o.Value
		}
		b, _ := json.Marshal(values)
		for i := range roles {
			f.Add(uint8(i), b)
		}
	}
	for i, role := range roles {
		values := map[string]json.RawMessage{}
		for k, o := range with(role, nil) {
			values[k] = o.Value
		}
		b, _ := json.Marshal(values)
		f.Add(uint8(i), b)
	}
	f.Add(uint8(1), []byte(`{"health":{"state":"pending","healthy":false},"provider_id":"p","addresses":[{"type":"InternalIP","address":"10.0.0.1"},{"type":"Hostname","address":"h"}],"failure_domain":"a"}`))
	f.Add(uint8(2), []byte(`{"health":null,"provider_id":null,"provider_id_list":["b","a"],"replicas":2,"instances":[{"provider_id":"b","addresses":[{"type":"ExternalDNS","address":"x"}]}]}`))

	f.Fuzz(func(t *testing.T, role uint8, doc []byte) {
		var values map[string]json.RawMessage
		if json.Unmarshal(doc, &values) != nil {
			return
		}
		outs := make(map[string]state.Output, len(values))
		for k, v := range values {
			outs[k] = state.Output{Value: v, Sensitive: true}
		}
		r := Decode(roles[int(role)%3], outs, Options{EndpointFromUser: role&4 != 0})

		status := r.Status()
		if (status == Valid) != (len(r.Problems) == 0) || (r.Err() != nil) != (status == Invalid) {
			t.Fatalf("status %s disagrees with problems %v", status, r.Problems)
		}
		for _, p := range r.Problems {
			if p.Message == "" || !strings.Contains(p.Message, p.Output) {
				t.Fatalf("problem %+v does not name its output", p)
			}
		}
		checkResult(t, r)
	})
}

// checkResult holds what Decode promises of every value it returns, valid or not.
func checkResult(t *testing.T, r *Result) {
	t.Helper()
	if e := r.ControlPlaneEndpoint; e != nil && (e.Host == "" || e.Port < 1 || e.Port > 65535) {
		t.Fatalf("half-set endpoint %+v", e)
	}
	names := map[string]bool{}
	for _, fd := range r.FailureDomains {
		if fd.Name == "" || names[fd.Name] || fd.ControlPlane == nil {
			t.Fatalf("bad failure domain %+v", fd)
		}
		names[fd.Name] = true
	}
	checkAddresses(t, r.Addresses)
	if !slices.IsSorted(r.ProviderIDList) || len(slices.Compact(slices.Clone(r.ProviderIDList))) != len(r.ProviderIDList) {
		t.Fatalf("provider ID list not sorted and unique: %d entries", len(r.ProviderIDList))
	}
	if len(r.Instances) > MaxInstances || r.InstancesTruncated != (r.InstancesTotal > MaxInstances) {
		t.Fatalf("%d instances of %d, truncated %t", len(r.Instances), r.InstancesTotal, r.InstancesTruncated)
	}
	for _, in := range r.Instances {
		checkAddresses(t, in.Addresses)
	}
	if r.Health != nil && (len(r.Health.Message) > maxHealthMessage || !slices.Contains(healthStates, r.Health.State)) {
		t.Fatalf("health out of bounds: %q, %d bytes", r.Health.State, len(r.Health.Message))
	}
	if r.Replicas != nil && *r.Replicas < 0 {
		t.Fatalf("negative replicas")
	}
}

func checkAddresses(t *testing.T, as []clusterv1.MachineAddress) {
	t.Helper()
	for i, a := range as {
		if a.Address == "" || !slices.Contains(addressOrder, a.Type) {
			t.Fatalf("bad address at %d", i)
		}
		if i > 0 {
			prev := as[i-1]
			pi, ai := slices.Index(addressOrder, prev.Type), slices.Index(addressOrder, a.Type)
			if pi > ai || (pi == ai && prev.Address >= a.Address) {
				t.Fatalf("addresses not in canonical order at %d", i)
			}
		}
	}
}
