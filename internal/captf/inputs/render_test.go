package inputs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/testenv/golden"
)

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func object(annotations map[string]string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Annotations: annotations}
}

// sources are one typical Source per role. Their user variables are variables the modules
// under test/modules declare, so the tofu test can run them.
func sources() map[contract.Role]Source {
	port := int32(6443)
	return map[contract.Role]Source{
		contract.RoleCluster: {
			Owner:  jobs.Owner{Kind: captfv1.KindCluster, Namespace: "ns1", Name: "c1", UID: "uid-c1", ClusterName: "c1"},
			Object: object(nil),
			Cluster: &ClusterInputs{
				KubernetesVersion: "v1.36.3",
				ClusterNetwork: &ClusterNetwork{
					Pods: []string{"192.168.0.0/16"}, Services: []string{"10.96.0.0/12"}, APIServerPort: &port,
				},
			},
			Variables: Variables{
				Values: map[string]json.RawMessage{
					"network_cidr":    raw(`"10.1.0.0/16"`),
					"failure_domains": raw(`["fd-a", "fd-b"]`),
					"health_message":  raw(`"<ready> & well"`),
					"endpoint_port":   raw(`6443.0`),
				},
				Sensitive: map[string]bool{"health_message": true},
			},
		},
		contract.RoleMachine: {
			Owner:  jobs.Owner{Kind: captfv1.KindMachine, Namespace: "ns1", Name: "c1-md-0-x7k2p", UID: "uid-m1", ClusterName: "c1"},
			Object: object(map[string]string{clusterv1.TemplateClonedFromNameAnnotation: "c1-md-0"}),
			Machine: &MachineInputs{
				MachineName: "c1-md-0-x7k2p-abcde", BootstrapData: []byte("#cloud-config\nruncmd: [echo hi]\n"),
				FailureDomain: "fd-a", KubernetesVersion: "v1.36.3+rke2r1",
			},
			ClusterOutputs: raw(`{"network_name": "ns1-c1", "mtu": 1500}`),
			Variables: Variables{
				Values:    map[string]json.RawMessage{"slow": raw(`0`), "interruptible": raw(`true`)},
				Sensitive: map[string]bool{},
			},
		},
		contract.RoleMachinePool: {
			Owner:  jobs.Owner{Kind: captfv1.KindMachinePool, Namespace: "ns1", Name: "c1-pool", UID: "uid-p1", ClusterName: "c1"},
			Object: object(nil),
			MachinePool: &MachinePoolInputs{
				MachinePoolName: "c1-pool", Replicas: 3, BootstrapData: []byte("{\"ignition\":{}}"), BootstrapFormat: "ignition",
				ClusterFailureDomains: []string{"fd-a", "fd-b"}, KubernetesVersion: "v1.36.3",
				NodeLabels: map[string]string{"pool": "c1-pool"},
			},
			Variables: Variables{
				Values:    map[string]json.RawMessage{"health_state": raw(`"running"`)},
				Sensitive: map[string]bool{"health_state": true},
			},
		},
	}
}

func TestRenderGolden(t *testing.T) {
	for role, src := range sources() {
		t.Run(string(role), func(t *testing.T) {
			r, err := Render(src)
			if err != nil {
				t.Fatal(err)
			}
			golden.Assert(t, filepath.Join("testdata", string(role), contract.RootModuleFile), r.MainTF)
			golden.Assert(t, filepath.Join("testdata", string(role), contract.VarsFile), r.TFVars)
			golden.Assert(t, filepath.Join("testdata", string(role), "hashes.txt"), []byte(r.Hash+"\n"))
		})
	}
}

// rootModule is the part of main.tf.json the contract fixes.
type rootModule struct {
	Terraform struct {
		Backend map[string]map[string]any `json:"backend"`
	} `json:"terraform"`
	Variable map[string]map[string]any    `json:"variable"`
	Module   map[string]map[string]string `json:"module"`
	Output   map[string]struct {
		Value     string
		Sensitive bool
	} `json:"output"`
}

func TestRenderFollowsTheContract(t *testing.T) {
	for role, src := range sources() {
		t.Run(string(role), func(t *testing.T) {
			g := NewWithT(t)
			r, err := Render(src)
			g.Expect(err).NotTo(HaveOccurred())
			var root rootModule
			g.Expect(json.Unmarshal(r.MainTF, &root)).To(Succeed())
			var vars map[string]any
			g.Expect(json.Unmarshal(r.TFVars, &vars)).To(Succeed())

			g.Expect(root.Terraform.Backend).To(Equal(map[string]map[string]any{"kubernetes": {}}), "backend settings come from -backend-config")

			want := []string{"captf_contract", "captf_cluster", "captf_object", "captf_tags"}
			if role != contract.RoleCluster {
				want = append(want, "captf_cluster_outputs")
			}
			want = append(want, contract.RoleInputs[role]...)
			want = append(want, slices.Sorted(maps.Keys(src.Variables.Values))...)
			g.Expect(slices.Sorted(maps.Keys(root.Variable))).To(ConsistOf(want), "one root variable per input and user variable")
			g.Expect(slices.Sorted(maps.Keys(vars))).To(ConsistOf(want), "a value for every root variable")

			module := root.Module["role"]
			g.Expect(module).To(HaveKeyWithValue("source", "../../module"))
			g.Expect(module).To(HaveLen(len(want) + 1))
			for _, name := range want {
				g.Expect(module).To(HaveKeyWithValue(name, "${var."+name+"}"))
				decl := root.Variable[name]
				g.Expect(decl).NotTo(HaveKey("type"), "%s: root variables are untyped; the module converts", name)
				if nullable[name] {
					g.Expect(decl).To(HaveKeyWithValue("default", BeNil()), name)
				} else {
					g.Expect(decl).NotTo(HaveKey("default"), name)
				}
				sensitive := name == "bootstrap_data" || name == "captf_cluster_outputs" || src.Variables.Sensitive[name]
				if sensitive {
					g.Expect(decl).To(HaveKeyWithValue("sensitive", true), name)
				} else {
					g.Expect(decl).NotTo(HaveKey("sensitive"), name)
				}
			}

			g.Expect(slices.Sorted(maps.Keys(root.Output))).To(ConsistOf(contract.RoleOutputs[role]))
			for name, out := range root.Output {
				g.Expect(out.Value).To(Equal("${module.role." + name + "}"))
				g.Expect(out.Sensitive).To(BeTrue(), name)
			}

			o := src.Owner
			g.Expect(vars["captf_contract"]).To(Equal("v1alpha1"))
			g.Expect(vars["captf_cluster"]).To(Equal(map[string]any{"name": "c1", "namespace": "ns1"}))
			g.Expect(vars["captf_object"]).To(Equal(map[string]any{"kind": o.Kind, "name": o.Name, "namespace": "ns1"}))
			g.Expect(vars["captf_tags"]).To(Equal(map[string]any{
				"captf.io/cluster": "c1", "captf.io/namespace": "ns1", "captf.io/kind": o.Kind, "captf.io/name": o.Name,
				"captf.io/managed-by": "captf", "captf.io/template": src.Object.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation],
			}))
			if role != contract.RoleCluster {
				g.Expect(vars).To(HaveKey("captf_cluster_outputs"))
			}
		})
	}
}

func TestRenderRoleValues(t *testing.T) {
	g := NewWithT(t)
	srcs := sources()

	r, err := Render(srcs[contract.RoleMachine])
	g.Expect(err).NotTo(HaveOccurred())
	var vars map[string]any
	g.Expect(json.Unmarshal(r.TFVars, &vars)).To(Succeed())
	g.Expect(vars["bootstrap_data"]).To(Equal("I2Nsb3VkLWNvbmZpZwpydW5jbWQ6IFtlY2hvIGhpXQo="), "always base64")
	g.Expect(vars["bootstrap_format"]).To(Equal("cloud-config"), "the default format")
	g.Expect(vars["kubernetes_version"]).To(Equal("v1.36.3+rke2r1"), "verbatim")
	g.Expect(string(r.TFVars)).NotTo(ContainSubstring("runcmd"), "bootstrap data never in clear")

	pool := srcs[contract.RoleMachinePool]
	r, err = Render(pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(r.TFVars, &vars)).To(Succeed())
	g.Expect(vars["failure_domains"]).To(Equal([]any{}), "nil renders an empty list")
	g.Expect(vars["captf_cluster_outputs"]).To(Equal(map[string]any{}), "no exports render {}")
	g.Expect(vars["autoscaling"]).To(Equal(map[string]any{"enabled": false, "min": 0.0, "max": 0.0}), "off is not null: modules read .enabled")

	cluster := srcs[contract.RoleCluster]
	cluster.Cluster.ClusterNetwork = ClusterNetworkOf(clusterv1.ClusterNetwork{})
	cluster.Cluster.ControlPlaneEndpoint = EndpointOf(clusterv1.APIEndpoint{Host: "api.example", Port: 443})
	cluster.Cluster.KubernetesVersion = ""
	r, err = Render(cluster)
	g.Expect(err).NotTo(HaveOccurred())
	vars = map[string]any{}
	g.Expect(json.Unmarshal(r.TFVars, &vars)).To(Succeed())
	g.Expect(vars).To(HaveKeyWithValue("cluster_network", BeNil()))
	g.Expect(vars).To(HaveKeyWithValue("kubernetes_version", BeNil()))
	g.Expect(vars["control_plane_endpoint"]).To(Equal(map[string]any{"host": "api.example", "port": 443.0}))
	g.Expect(string(r.TFVars)).To(ContainSubstring(`"<ready> & well"`), "no HTML escaping")
	g.Expect(string(r.TFVars)).To(ContainSubstring(`6443.0`), "number literals of user variables are kept")
}

func TestClusterNetworkOf(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ClusterNetworkOf(clusterv1.ClusterNetwork{})).To(BeNil())
	n := ClusterNetworkOf(clusterv1.ClusterNetwork{ServiceDomain: "cluster.local"})
	g.Expect(n.Pods).To(BeNil())
	g.Expect(*n.ServiceDomain).To(Equal("cluster.local"))
	g.Expect(n.APIServerPort).To(BeNil())
	g.Expect(EndpointOf(clusterv1.APIEndpoint{})).To(BeNil())
}

func TestRenderRefuses(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Source)
		is     error
		want   string
	}{
		{"no role inputs", func(s *Source) { s.Machine = nil }, nil, "set exactly one of"},
		{"two role inputs", func(s *Source) { s.Cluster = &ClusterInputs{} }, nil, "set exactly one of"},
		{"inputs of another role", func(s *Source) { s.Machine, s.Cluster = nil, &ClusterInputs{} }, nil, "the machine role's inputs are not set"},
		{"unknown kind", func(s *Source) { s.Owner.Kind = "Machine" }, nil, "is not a CAPTF kind"},
		{"reserved variable", func(s *Source) { s.Variables.Values["machine_name"] = raw(`"x"`) }, ErrVariablesInvalid, `variable "machine_name"`},
		{"captf_ variable", func(s *Source) { s.Variables.Values["captf_x"] = raw(`"x"`) }, ErrVariablesInvalid, "reserved"},
		{"meta-argument", func(s *Source) { s.Variables.Values["count"] = raw(`1`) }, ErrVariablesInvalid, "reserved"},
		{"bad name", func(s *Source) { s.Variables.Values["1x"] = raw(`1`) }, ErrVariablesInvalid, "not a valid name"},
		{"bad value", func(s *Source) { s.Variables.Values["x"] = raw(`{"secret"`) }, ErrVariablesInvalid, "not valid JSON"},
		{"bad exports", func(s *Source) { s.ClusterOutputs = raw(`{`) }, nil, "the cluster's exports"},
		{"too large", func(s *Source) {
			s.Variables.Values["big"] = raw(`"` + strings.Repeat("x", MaxSize) + `"`)
		}, ErrInputsTooLarge, "more than the budget of 1000000 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			src := sources()[contract.RoleMachine]
			tt.change(&src)
			_, err := Render(src)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tt.want))
			g.Expect(err.Error()).NotTo(ContainSubstring("secret"), "values never appear in errors")
			if tt.is != nil {
				g.Expect(errors.Is(err, tt.is)).To(BeTrue())
			}
		})
	}

	g := NewWithT(t)
	src := sources()[contract.RoleCluster]
	src.ClusterOutputs = raw(`{}`)
	_, err := Render(src)
	g.Expect(err).To(MatchError(ContainSubstring("the cluster role receives no cluster outputs")))

	src = sources()[contract.RoleMachine]
	src.Variables.Values["big"] = raw(`"` + strings.Repeat("x", MaxSize) + `"`)
	_, err = Render(src)
	var tooLarge *TooLargeError
	g.Expect(errors.As(err, &tooLarge)).To(BeTrue())
	g.Expect(tooLarge.Size).To(BeNumerically(">", MaxSize))
	g.Expect(tooLarge.Budget).To(Equal(MaxSize))
}

func TestHashes(t *testing.T) {
	base := func() Source { return sources()[contract.RoleMachinePool] }
	tests := []struct {
		name     string
		change   func(*Source)
		sameHash bool
	}{
		{"nothing", func(*Source) {}, true},
		{"UID, labels, annotations and generation are not inputs", func(s *Source) {
			s.Owner.UID = "other"
			s.Object = &metav1.ObjectMeta{
				UID: "other", Generation: 7, Labels: map[string]string{"a": "b"},
				Annotations: map[string]string{"x": "y", "clusterctl.cluster.x-k8s.io/block-move": ""},
			}
		}, true},
		{"variable order", func(s *Source) {
			s.Variables.Values = map[string]json.RawMessage{"health_state": raw(`"running"`)}
		}, true},
		{"exports", func(s *Source) { s.ClusterOutputs = raw(`{"network_name": "n2"}`) }, false},
		{"sensitivity is not a value", func(s *Source) { s.Variables.Sensitive = nil }, true},
		// A rotated bootstrap token is a change: an approval binds the exact inputs it saw.
		{"bootstrap data rotates", func(s *Source) { s.MachinePool.BootstrapData = []byte("rotated") }, false},
		{"replicas", func(s *Source) { s.MachinePool.Replicas = 4 }, false},
		// What the module last reported is no wish: an instance that came or went outside
		// OpenTofu starts no apply. An instance to remove does.
		{"current instances are observed", func(s *Source) { s.MachinePool.CurrentInstances = []string{"p-0"} }, true},
		{"an instance to remove", func(s *Source) { s.MachinePool.InstancesToRemove = []string{"p-0"} }, false},
		{"replicas while autoscaling are the autoscaler's", func(s *Source) {
			s.MachinePool.Autoscaling = &Autoscaling{Enabled: true, Min: 1, Max: 5}
		}, false},
		{"template", func(s *Source) {
			s.Object = object(map[string]string{clusterv1.TemplateClonedFromNameAnnotation: "t2"})
		}, false},
		{"a variable set", func(s *Source) { s.Variables.Values["extra"] = raw(`null`) }, false},
	}
	r0, err := Render(base())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			src := base()
			tt.change(&src)
			r, err := Render(src)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Hash == r0.Hash).To(Equal(tt.sameHash), "inputs hash")
			g.Expect(r.Hash).To(MatchRegexp(`^h2:[0-9a-f]{64}$`))
		})
	}

	t.Run("replicas do not count while autoscaling", func(t *testing.T) {
		g := NewWithT(t)
		src := base()
		src.MachinePool.Autoscaling = &Autoscaling{Enabled: true, Min: 1, Max: 5}
		r1, err := Render(src)
		g.Expect(err).NotTo(HaveOccurred())
		src.MachinePool.Replicas = 5
		r2, err := Render(src)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r2.Hash).To(Equal(r1.Hash))
		g.Expect(r2.TFVars).NotTo(Equal(r1.TFVars), "but they are rendered")
	})

	t.Run("key order and spacing inside a value do not count", func(t *testing.T) {
		g := NewWithT(t)
		src := base()
		src.ClusterOutputs = raw(`{"a": [1, 2], "b": {"y": 1, "x": 2}}`)
		r1, err := Render(src)
		g.Expect(err).NotTo(HaveOccurred())
		src.ClusterOutputs = raw(` { "b" : {"x":2,"y":1}, "a":[1,2] } `)
		r2, err := Render(src)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r2.Hash).To(Equal(r1.Hash))
		g.Expect(r2.TFVars).To(Equal(r1.TFVars))
	})

	t.Run("number literals of user variables count as written", func(t *testing.T) {
		g := NewWithT(t)
		src := sources()[contract.RoleCluster]
		r1, err := Render(src)
		g.Expect(err).NotTo(HaveOccurred())
		src.Variables.Values["endpoint_port"] = raw(`6443`)
		r2, err := Render(src)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r2.Hash).NotTo(Equal(r1.Hash))
	})
}

// TestHashIsOfTheRenderedValues recomputes the hash from the rendered file independently: the
// hash covers exactly what the run receives, but a pool's current_instances (what the module
// reported).
func TestHashIsOfTheRenderedValues(t *testing.T) {
	for role, src := range sources() {
		g := NewWithT(t)
		r, err := Render(src)
		g.Expect(err).NotTo(HaveOccurred())
		var compact bytes.Buffer
		g.Expect(json.Compact(&compact, r.TFVars)).To(Succeed())
		doc, err := decodeObject(r.TFVars)
		g.Expect(err).NotTo(HaveOccurred())
		canonical, err := marshalCanonical(doc)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(canonical).To(Equal(json.RawMessage(compact.Bytes())), "%s: the file is canonical JSON, indented", role)
		if role == contract.RoleMachinePool {
			g.Expect(doc).To(HaveKey(inputCurrent))
			delete(doc, inputCurrent)
			canonical, err = marshalCanonical(doc)
			g.Expect(err).NotTo(HaveOccurred())
		}
		sum := sha256.Sum256(canonical)
		g.Expect(r.Hash).To(Equal("h2:"+hex.EncodeToString(sum[:])), role)
	}
}

func TestBoundedName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(BoundedName("captf-inputs-m-x")).To(Equal("captf-inputs-m-x"))
	long := "captf-inputs-m-" + strings.Repeat("a", 219) + ".-" + strings.Repeat("b", 30)
	got := BoundedName(long)
	g.Expect(got).To(HaveLen(maxNameLength - 2))
	g.Expect(got).To(MatchRegexp(`^captf-inputs-m-a+-[0-9a-f]{16}$`), "no '.' or '-' left before the suffix")
	g.Expect(BoundedName(long + "c")).NotTo(Equal(got))
	g.Expect(SecretName(jobs.Owner{Kind: captfv1.KindMachinePool, Name: "p"})).To(Equal("captf-inputs-mp-p"))
	g.Expect(BoundedName(strings.Repeat("a", 300))).To(HaveLen(maxNameLength))
}
