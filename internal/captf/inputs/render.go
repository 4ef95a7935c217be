package inputs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/jobs"
)

// MaxSize is the budget of the rendered inputs (both files together): they must fit one
// Secret, whose data the API server limits to 1 MiB, with room for keys and metadata.
const MaxSize = 1_000_000

// ErrInputsTooLarge: the rendered inputs exceed MaxSize (the InputsTooLarge condition reason).
// The error returned is a *TooLargeError; match it with errors.Is.
var ErrInputsTooLarge = errors.New("rendered inputs too large")

// TooLargeError says how far the rendered inputs exceed the budget.
type TooLargeError struct {
	Size, Budget int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("inputs: render: the rendered inputs are %d bytes, more than the budget of %d bytes; shrink the variables or the cluster's exports", e.Size, e.Budget)
}

// Is makes errors.Is(err, ErrInputsTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrInputsTooLarge }

// Names of contract inputs this package treats specially.
const (
	inputBootstrapData = "bootstrap_data"
	inputReplicas      = "replicas"
	inputAutoscaling   = "autoscaling"
	inputCurrent       = "current_instances"
)

// Tag keys of captf_tags, the map a module applies to every taggable resource.
const (
	TagCluster   = "captf.io/cluster"
	TagNamespace = "captf.io/namespace"
	TagKind      = "captf.io/kind"
	TagName      = "captf.io/name"
	TagManagedBy = "captf.io/managed-by"
	TagTemplate  = "captf.io/template"
)

// nullable are the contract inputs whose value may be null ("not set" or "not known yet"); the
// generated root module declares them with default null.
var nullable = map[string]bool{
	"control_plane_endpoint": true, "kubernetes_version": true, "cluster_network": true,
	"failure_domain": true, "autoscaling": true,
}

// Source is everything one run's inputs are rendered from. The reconciler fills in the role's
// contract inputs from the CAPI objects; Render adds the common captf_* inputs and the user
// variables.
type Source struct {
	// Owner is the CAPTF object; its Kind picks the role.
	Owner jobs.Owner
	// Object is the same CAPTF object; only its cluster.x-k8s.io/cloned-from-name annotation
	// is read (captf_tags' captf.io/template).
	Object metav1.Object

	// Exactly one of Cluster, Machine and MachinePool is set: the one of Owner's role.
	Cluster     *ClusterInputs
	Machine     *MachineInputs
	MachinePool *MachinePoolInputs

	// ClusterOutputs is the cluster module's exports output, passed to machines and pools as
	// captf_cluster_outputs; nil renders {} (a cluster that is not a TerraformCluster). It
	// must be nil for the cluster role, which never receives it.
	ClusterOutputs json.RawMessage

	// Variables are the user variables (ResolveVariables).
	Variables Variables
}

// ClusterInputs are the cluster role's contract inputs.
type ClusterInputs struct {
	// ControlPlaneEndpoint is the endpoint fixed by the Cluster or the TerraformCluster; nil
	// lets the module choose (and always nil once the module chose).
	ControlPlaneEndpoint *Endpoint
	// KubernetesVersion is Cluster.spec.topology.version; "" renders null.
	KubernetesVersion string
	// ControlPlaneInitialized is latched true once the control plane was initialized.
	ControlPlaneInitialized bool
	// ClusterNetwork is Cluster.spec.clusterNetwork; nil renders null (see ClusterNetworkOf).
	ClusterNetwork *ClusterNetwork
}

// Endpoint is a control-plane endpoint.
type Endpoint struct {
	Host string `json:"host"`
	Port int32  `json:"port"`
}

// EndpointOf converts a CAPI endpoint; an unset one (no host) is nil.
func EndpointOf(e clusterv1.APIEndpoint) *Endpoint {
	if e.Host == "" {
		return nil
	}
	return &Endpoint{Host: e.Host, Port: e.Port}
}

// ClusterNetwork is the cluster_network input; unset fields render null.
type ClusterNetwork struct {
	Pods          []string `json:"pods"`
	Services      []string `json:"services"`
	ServiceDomain *string  `json:"service_domain"`
	APIServerPort *int32   `json:"api_server_port"`
}

// ClusterNetworkOf converts a CAPI cluster network; an empty one is nil.
func ClusterNetworkOf(n clusterv1.ClusterNetwork) *ClusterNetwork {
	out := &ClusterNetwork{Pods: n.Pods.CIDRBlocks, Services: n.Services.CIDRBlocks}
	if n.ServiceDomain != "" {
		out.ServiceDomain = &n.ServiceDomain
	}
	if n.APIServerPort != 0 {
		out.APIServerPort = &n.APIServerPort
	}
	if out.Pods == nil && out.Services == nil && out.ServiceDomain == nil && out.APIServerPort == nil {
		return nil
	}
	return out
}

// MachineInputs are the machine role's contract inputs.
type MachineInputs struct {
	// MachineName is the CAPI Machine's name.
	MachineName string
	// BootstrapData is the bootstrap Secret's value, raw; it is always rendered base64 encoded
	// (ignition and cloud-config alike) and declared sensitive.
	BootstrapData []byte
	// BootstrapFormat is the bootstrap Secret's format key; "" renders cloud-config.
	BootstrapFormat string
	// FailureDomain the Machine asks for; "" renders null.
	FailureDomain string
	// KubernetesVersion of the Machine, verbatim (e.g. v1.33.1+rke2r1); "" renders null.
	KubernetesVersion string
	// ControlPlane is true for control-plane Machines.
	ControlPlane bool
}

// MachinePoolInputs are the machine pool role's contract inputs.
type MachinePoolInputs struct {
	// MachinePoolName is the CAPI MachinePool's name.
	MachinePoolName string
	// Replicas is the desired instance count. While Autoscaling is enabled it is rendered but
	// not hashed (see Hashes).
	Replicas int32
	// BootstrapData is the bootstrap Secret's value, raw; rendered base64 encoded, sensitive.
	BootstrapData []byte
	// BootstrapFormat is the bootstrap Secret's format key; "" renders cloud-config.
	BootstrapFormat string
	// FailureDomains the MachinePool asks for; nil renders [].
	FailureDomains []string
	// ClusterFailureDomains are the failure domain names from the cluster's state; nil renders [].
	ClusterFailureDomains []string
	// KubernetesVersion of the pool, verbatim; "" renders null.
	KubernetesVersion string
	// NodeLabels are MachinePool.spec.template.metadata.labels; nil renders {}.
	NodeLabels map[string]string
	// Autoscaling bounds; nil renders {enabled = false, min = 0, max = 0}, as the public
	// contract does: pool modules read var.autoscaling.enabled without a null check.
	Autoscaling *Autoscaling
	// CurrentInstances are the ids of the instances the module's last instances output listed
	// (what it observed, like the replicas output: rendered, not hashed); nil renders [].
	CurrentInstances []string
	// InstancesToRemove are the ids of the instances whose machines are being deleted: the
	// module removes exactly these; nil renders [].
	InstancesToRemove []string
}

// Autoscaling is the autoscaling input.
type Autoscaling struct {
	Enabled bool  `json:"enabled"`
	Min     int32 `json:"min"`
	Max     int32 `json:"max"`
}

// Rendered is the generated root module of one run and the values of its variables.
type Rendered struct {
	// MainTF is main.tf.json: the kubernetes backend, the root variables, module "role" and
	// the re-exported contract outputs.
	MainTF []byte
	// TFVars is terraform.tfvars.json: the value of every root variable.
	TFVars []byte
	// Hash is the inputs hash of TFVars (see Hash).
	Hash string
}

// Size is the byte size the budget counts.
func (r *Rendered) Size() int { return len(r.MainTF) + len(r.TFVars) }

// Data is the rendered inputs as Secret data, keyed by file name.
func (r *Rendered) Data() map[string][]byte {
	return map[string][]byte{contract.RootModuleFile: r.MainTF, contract.VarsFile: r.TFVars}
}

// Render generates the root module of the source's role and its variable values, and hashes
// them. The root module configures the kubernetes backend without settings (the runner passes
// them with -backend-config), declares every input as an untyped root variable (the module's
// own declarations convert the values, so a module written for CAPTF receives them exactly as
// there), calls the module at contract.ModuleSource forwarding each variable by name, and
// re-exports every contract output as sensitive, so a module may mark any output sensitive
// without breaking the plan. It is pure: the same source gives the same bytes.
func Render(src Source) (*Rendered, error) {
	role, err := contract.RoleOf(src.Owner.Kind)
	if err != nil {
		return nil, fmt.Errorf("inputs: render: %w", err)
	}
	values, err := roleValues(role, src)
	if err != nil {
		return nil, err
	}
	sensitive := map[string]bool{}
	for name := range contract.SensitiveInputs {
		sensitive[name] = true
	}
	// The cluster's exports are a sensitive output of its root module and stay sensitive here:
	// plans never print them, and the runner redacts their values.
	sensitive[contract.InputClusterOutputs] = true
	user := slices.Sorted(maps.Keys(src.Variables.Values))
	for _, name := range user {
		if err := CheckVariableName(role, name, "the variables"); err != nil {
			return nil, err
		}
		v, err := CompactJSON(src.Variables.Values[name])
		if err != nil {
			return nil, invalid("variable %q: %v", name, err)
		}
		values[name] = v
		if src.Variables.Sensitive[name] {
			sensitive[name] = true
		}
	}

	inputs := append(commonInputs(role), contract.RoleInputs[role]...)
	variable := map[string]any{}
	module := map[string]any{"source": contract.ModuleSource}
	for _, name := range append(inputs, user...) {
		decl := map[string]any{}
		if nullable[name] {
			decl["default"] = nil
		}
		if sensitive[name] {
			decl["sensitive"] = true
		}
		variable[name] = decl
		module[name] = "${var." + name + "}"
	}
	output := map[string]any{}
	for _, name := range contract.RoleOutputs[role] {
		output[name] = map[string]any{"value": "${module.role." + name + "}", "sensitive": true}
	}
	root := map[string]any{
		"terraform": map[string]any{"backend": map[string]any{contract.BackendType: map[string]any{}}},
		"variable":  variable,
		"module":    map[string]any{"role": module},
		"output":    output,
	}

	r := &Rendered{}
	if r.MainTF, err = marshalFile(root); err != nil {
		return nil, fmt.Errorf("inputs: render %s: %w", contract.RootModuleFile, err)
	}
	if r.TFVars, err = marshalVars(values); err != nil {
		return nil, fmt.Errorf("inputs: render %s: %w", contract.VarsFile, err)
	}
	if r.Size() > MaxSize {
		return nil, &TooLargeError{Size: r.Size(), Budget: MaxSize}
	}
	if r.Hash, err = Hash(role, r.TFVars); err != nil {
		return nil, err
	}
	return r, nil
}

// commonInputs are the captf_* inputs of a role; the cluster role never gets its own exports.
func commonInputs(role contract.Role) []string {
	in := []string{contract.InputContract, contract.InputCluster, contract.InputObject, contract.InputTags}
	if role != contract.RoleCluster {
		in = append(in, contract.InputClusterOutputs)
	}
	return in
}

// roleValues returns the values of the common and the role's contract inputs.
func roleValues(role contract.Role, src Source) (map[string]any, error) {
	o := src.Owner
	template := ""
	if src.Object != nil {
		template = src.Object.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation]
	}
	v := map[string]any{
		contract.InputContract: contract.Version,
		contract.InputCluster:  map[string]any{"name": o.ClusterName, "namespace": o.Namespace},
		contract.InputObject:   map[string]any{"kind": o.Kind, "name": o.Name, "namespace": o.Namespace},
		contract.InputTags: map[string]any{
			TagCluster: o.ClusterName, TagNamespace: o.Namespace, TagKind: o.Kind, TagName: o.Name,
			TagManagedBy: "captf", TagTemplate: template,
		},
	}
	set := 0
	for _, p := range []bool{src.Cluster != nil, src.Machine != nil, src.MachinePool != nil} {
		if p {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("inputs: render %s %s/%s: set exactly one of Cluster, Machine and MachinePool (%d set)", o.Kind, o.Namespace, o.Name, set)
	}
	if role != contract.RoleCluster {
		outputs := json.RawMessage("{}")
		if len(src.ClusterOutputs) > 0 {
			var err error
			if outputs, err = CompactJSON(src.ClusterOutputs); err != nil {
				return nil, fmt.Errorf("inputs: render %s %s/%s: the cluster's exports: %w", o.Kind, o.Namespace, o.Name, err)
			}
		}
		v[contract.InputClusterOutputs] = outputs
	} else if src.ClusterOutputs != nil {
		return nil, fmt.Errorf("inputs: render %s %s/%s: the cluster role receives no cluster outputs", o.Kind, o.Namespace, o.Name)
	}

	switch {
	case role == contract.RoleCluster && src.Cluster != nil:
		c := src.Cluster
		v["control_plane_endpoint"] = orNull(c.ControlPlaneEndpoint)
		v["kubernetes_version"] = stringOrNull(c.KubernetesVersion)
		v["control_plane_initialized"] = c.ControlPlaneInitialized
		v["cluster_network"] = orNull(c.ClusterNetwork)
	case role == contract.RoleMachine && src.Machine != nil:
		m := src.Machine
		v["machine_name"] = m.MachineName
		v[inputBootstrapData] = base64.StdEncoding.EncodeToString(m.BootstrapData)
		v["bootstrap_format"] = bootstrapFormat(m.BootstrapFormat)
		v["failure_domain"] = stringOrNull(m.FailureDomain)
		v["kubernetes_version"] = stringOrNull(m.KubernetesVersion)
		v["control_plane"] = m.ControlPlane
	case role == contract.RoleMachinePool && src.MachinePool != nil:
		p := src.MachinePool
		v["machinepool_name"] = p.MachinePoolName
		v[inputReplicas] = p.Replicas
		v[inputBootstrapData] = base64.StdEncoding.EncodeToString(p.BootstrapData)
		v["bootstrap_format"] = bootstrapFormat(p.BootstrapFormat)
		v["failure_domains"] = orEmpty(p.FailureDomains)
		v["cluster_failure_domains"] = orEmpty(p.ClusterFailureDomains)
		v["kubernetes_version"] = stringOrNull(p.KubernetesVersion)
		labels := p.NodeLabels
		if labels == nil {
			labels = map[string]string{}
		}
		v["node_labels"] = labels
		autoscaling := Autoscaling{}
		if p.Autoscaling != nil {
			autoscaling = *p.Autoscaling
		}
		v[inputAutoscaling] = autoscaling
		v[inputCurrent] = orEmpty(p.CurrentInstances)
		v["instances_to_remove"] = orEmpty(p.InstancesToRemove)
	default:
		return nil, fmt.Errorf("inputs: render %s %s/%s: the %s role's inputs are not set", o.Kind, o.Namespace, o.Name, role)
	}
	return v, nil
}

// orNull renders a nil pointer as JSON null (a typed nil in an interface would not be nil).
func orNull[T any](p *T) any {
	if p == nil {
		return nil
	}
	return p
}

func stringOrNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func bootstrapFormat(f string) string {
	if f == "" {
		return "cloud-config"
	}
	return f
}

// marshalVars writes the values as canonical JSON, indented: keys sorted at every level (also
// inside the struct-typed inputs), numbers as written.
func marshalVars(values map[string]any) ([]byte, error) {
	b, err := marshalCanonical(values)
	if err != nil {
		return nil, err
	}
	doc, err := decodeObject(b)
	if err != nil {
		return nil, err
	}
	return marshalFile(doc)
}

// marshalFile writes a file as indented JSON (people read these in the Secret), without HTML
// escaping and with a final newline.
func marshalFile(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
