// Package outputs decodes a role module's outputs, as the state records them, against module
// contract v1alpha1: the common health output, and per role the control-plane endpoint,
// failure domains and exports (cluster), provider ID, addresses and failure domain (machine),
// and provider IDs, replicas and instances (machine pool).
//
// Every contract output is marked sensitive in the generated root module, and a value can hold
// credentials, so nothing here logs a value or puts one into a message: messages name the
// output, the position inside it and what was expected, and say which JSON kind was found.
package outputs

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/state"
)

// Status is the verdict on a role's outputs, worst first: Invalid, Pending, Valid. (An output the
// module does not declare fails the apply itself, since the generated root module re-exports
// every contract output, so it never shows here.)
type Status string

const (
	// Valid: every contract output is well formed, and the required ones are known.
	Valid Status = "Valid"
	// Pending: a required output is still null.
	Pending Status = "Pending"
	// Invalid: an output has the wrong shape.
	Invalid Status = "Invalid"
)

func (s Status) rank() int {
	switch s {
	case Invalid:
		return 2
	case Pending:
		return 1
	}
	return 0
}

// Problem is one output that is not valid.
type Problem struct {
	// Output is the output's name.
	Output string
	// Status is Pending, Missing or Invalid.
	Status Status
	// Message names the output and what was expected; it never holds the value.
	Message string
}

// Limits that keep decoded outputs within what the API types accept.
const (
	// MaxInstances is how many pool instances are kept; the rest are counted only.
	MaxInstances = 1000
	// MaxFailureDomains is the most failure domains status.failureDomains holds.
	MaxFailureDomains = 100
	// MaxAddresses is the most addresses a machine may report (clusterv1.MachineAddresses).
	MaxAddresses = 256
	// MaxInstanceAddresses is the most addresses of one pool instance.
	MaxInstanceAddresses = 16
	// MaxExportKeys is the most export keys StatusExports lists.
	MaxExportKeys = 100

	maxHealthMessage = 1024
	maxProviderID    = 512
	maxName          = 256
	maxInstanceState = 32
)

// Options carry what the decoder cannot see in the outputs.
type Options struct {
	// EndpointFromUser is true when the TerraformCluster's spec.controlPlaneEndpoint came from
	// the user; a null control_plane_endpoint is then not pending.
	EndpointFromUser bool
}

// Result is a role's decoded outputs. Fields of outputs that are null, or not valid, are
// zero; Problems says why.
type Result struct {
	// Role the outputs were decoded for.
	Role contract.Role
	// Problems lists outputs that are pending or invalid, in contract order.
	Problems []Problem

	// Health is the health output; nil while null.
	Health *captfv1.Health

	// ControlPlaneEndpoint is the cluster's endpoint; nil while null.
	ControlPlaneEndpoint *clusterv1.APIEndpoint
	// FailureDomains of the cluster, in the module's order.
	FailureDomains []clusterv1.FailureDomain
	// Exports is the cluster's exports as JSON; nil while null. It is for the machines' and
	// pools' inputs only: status shows StatusExports.
	Exports []byte
	// ExportsBytes is len(Exports), for the 64 KiB status limit and metrics.
	ExportsBytes int

	// ProviderID of a machine, or of a pool as a whole; "" while null.
	ProviderID string
	// Addresses of a machine, sorted canonically (see sortAddresses).
	Addresses []clusterv1.MachineAddress
	// FailureDomain a machine was placed in; "" while null.
	FailureDomain string

	// ProviderIDList of a pool, sorted and without duplicates.
	ProviderIDList []string
	// Replicas of a pool; nil while null.
	Replicas *int32
	// Instances of a pool, sorted by provider ID then instance ID, at most MaxInstances.
	Instances []captfv1.MachinePoolInstance
	// InstancesTotal counts every instance the module reported.
	InstancesTotal int
	// InstancesTruncated is true when more than MaxInstances were reported.
	InstancesTruncated bool
}

// StatusExports is what TerraformCluster.status.exports shows of the exports output: the
// sorted list of its top-level keys (at most MaxExportKeys, none longer than 256 bytes), never
// a value. The generated root module declares exports sensitive and a module may export
// credentials (a join token, a kubeconfig); status is readable by everyone who can get the
// object, and machines and pools read the values from the state. Nil while exports is null or
// not an object.
func (r *Result) StatusExports() *apiextensionsv1.JSON {
	if r.Exports == nil {
		return nil
	}
	v, err := parse(r.Exports)
	if err != nil {
		return nil
	}
	fields, err := v.object("", "an object")
	if err != nil {
		return nil
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if len(k) <= maxName {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	b, err := json.Marshal(keys[:min(len(keys), MaxExportKeys)])
	if err != nil {
		return nil
	}
	return &apiextensionsv1.JSON{Raw: b}
}

// Status is the worst status among the problems, Valid without any.
func (r *Result) Status() Status {
	s := Valid
	for _, p := range r.Problems {
		if p.Status.rank() > s.rank() {
			s = p.Status
		}
	}
	return s
}

// Reason maps Status to the OutputsValid condition's reason.
func (r *Result) Reason() string {
	switch r.Status() {
	case Invalid:
		return captfv1.OutputsInvalidReason
	case Pending:
		return captfv1.OutputsPendingReason
	}
	return captfv1.OutputsValidReason
}

// Message joins the messages of the problems of the worst status, for the condition.
func (r *Result) Message() string {
	s := r.Status()
	var msgs []string
	for _, p := range r.Problems {
		if p.Status == s {
			msgs = append(msgs, p.Message)
		}
	}
	return strings.Join(msgs, "; ")
}

// Err is nil for Valid and Pending, and an *Error for Invalid: the module's fault, which no
// waiting cures.
func (r *Result) Err() error {
	switch s := r.Status(); s {
	case Invalid:
		return &Error{Status: s, Message: r.Message()}
	}
	return nil
}

// Error is a contract violation of a module's outputs.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	return "outputs: " + strings.ToLower(string(e.Status)) + ": " + e.Message
}

// requiredNonNull are the outputs without which a role is not provisioned.
func requiredNonNull(role contract.Role, opts Options) map[string]bool {
	switch role {
	case contract.RoleCluster:
		return map[string]bool{"control_plane_endpoint": !opts.EndpointFromUser}
	case contract.RoleMachine:
		return map[string]bool{"provider_id": true}
	case contract.RoleMachinePool:
		return map[string]bool{"provider_id_list": true, "replicas": true}
	}
	return nil
}

// Decode decodes the contract outputs of role from a state's root outputs. Outputs outside the
// contract are ignored. Values of valid outputs are decoded even when others are not, so a
// controller can still report health while, say, addresses are invalid.
func Decode(role contract.Role, outs map[string]state.Output, opts Options) *Result {
	r := &Result{Role: role}
	names, ok := contract.RoleOutputs[role]
	if !ok {
		r.Problems = append(r.Problems, Problem{Status: Invalid, Message: fmt.Sprintf("%q is not a module role", role)})
		return r
	}
	required := requiredNonNull(role, opts)
	for _, name := range names {
		// OpenTofu and Terraform leave root outputs whose value is null out of the state, so an
		// absent output is a null one. (An output the module does not declare never gets this
		// far: the generated root module re-exports every contract output, and the apply fails
		// on the undeclared attribute.)
		o, ok := outs[name]
		v := value{}
		if ok {
			var err error
			if v, err = parse(o.Value); err != nil {
				r.invalid(name, "is not valid JSON")
				continue
			}
		}
		if ok && !v.isNull() {
			err := r.decodeOutput(name, v)
			if err == nil {
				continue
			}
			if !errors.Is(err, errNull) {
				r.invalid(name, err.Error())
				continue
			}
		}
		if required[name] {
			r.Problems = append(r.Problems, Problem{Output: name, Status: Pending,
				Message: fmt.Sprintf("output %q is still null", name)})
		}
	}
	return r
}

func (r *Result) invalid(name, msg string) {
	r.Problems = append(r.Problems, Problem{Output: name, Status: Invalid, Message: fmt.Sprintf("output %q %s", name, msg)})
}

// decodeOutput decodes one non-null output into r; the error says what was expected.
func (r *Result) decodeOutput(name string, v value) error {
	switch name {
	case "health":
		return r.decodeHealth(v)
	case "control_plane_endpoint":
		return r.decodeEndpoint(v)
	case "failure_domains":
		return r.decodeFailureDomains(v)
	case "exports":
		r.Exports = v.raw
		r.ExportsBytes = len(v.raw)
		return nil
	case "provider_id":
		return v.optionalString(&r.ProviderID, "", maxProviderID)
	case "addresses":
		a, err := decodeAddresses(v, "", MaxAddresses)
		r.Addresses = a
		return err
	case "failure_domain":
		return v.optionalString(&r.FailureDomain, "", maxName)
	case "provider_id_list":
		return r.decodeProviderIDList(v)
	case "replicas":
		n, err := v.int32("")
		if err == nil {
			r.Replicas = &n
		}
		return err
	case "instances":
		return r.decodeInstances(v)
	}
	return nil
}
