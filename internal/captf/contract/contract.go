// Package contract holds the facts of CAPTF's module contract v1alpha1 that every other CAPTF
// package shares: the fixed paths inside a Job, the roles and their reserved inputs and outputs,
// and the names of the kubernetes backend's state objects. A module image written for the public
// CAPTF project relies on exactly these, so they change only with a new contract version.
package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// Version is the module contract version passed to every module as captf_contract.
const Version = "v1alpha1"

// Paths inside every Job pod.
const (
	// ModuleDir holds the role module (in the module image).
	ModuleDir = "/captf/module"
	// RuntimePath is the tofu or terraform binary (in the module image).
	RuntimePath = "/captf/runtime"
	// ProvidersDir is an optional provider mirror (in the module image).
	ProvidersDir = "/captf/providers"
	// WorkDir is the writable work folder (an emptyDir); the generated root module lives in
	// WorkDir/root, so its module source ../../module reaches ModuleDir.
	WorkDir = "/captf/work"
	// BinDir receives the runner binary from the init container.
	BinDir = "/captf/bin"
	// RunnerPath is where the module container finds the runner.
	RunnerPath = BinDir + "/runner"
	// ConfigDir mounts the per-run Secret (main.tf.json, terraform.tfvars.json, backups).
	ConfigDir = "/captf/config"
	// CredentialsDir mounts the credentials Secret.
	CredentialsDir = "/var/run/captf/credentials"
	// TerminationLog is where the runner writes its result document.
	TerminationLog = "/dev/termination-log"
)

// Layout of a Job the runner relies on (added for the runner).
const (
	// RootDirName is the folder under WorkDir that receives the generated root module.
	RootDirName = "root"
	// ModuleSource is the generated root module's source for module "role": from
	// WorkDir/root it reaches ModuleDir, so the module must sit at WorkDir/../module.
	ModuleSource = "../../module"
	// RestoreDir is the folder under ConfigDir where a restore Job projects the backup's state
	// chunks as files "0", "1", ... (each the chunk Secret's gzip "tfstate" bytes; the chunks
	// concatenated in index order are one gzip stream of the state JSON).
	RestoreDir = "restore"
	// SavedPlanDir is the folder under ConfigDir where an approved apply Job projects the
	// approved saved plan's chunks as files "0", "1", ... (each a saved plan Secret's data; in
	// index order they are one gzip stream, see internal/captf/savedplan).
	SavedPlanDir = "saved-plan"
	// BackendType is the only state backend the generated root module configures.
	BackendType = "kubernetes"
)

// Operations a CAPTF Job performs; one Job runs one (added for the runner).
const (
	OpPlan    = "plan"
	OpApply   = "apply"
	OpDestroy = "destroy"
	OpRefresh = "refresh"
	OpDrift   = "drift"
	OpRestore = "restore"
)

// Files in ConfigDir and in the durable inputs Secret.
const (
	// RootModuleFile is the generated root module.
	RootModuleFile = "main.tf.json"
	// VarsFile holds the values of the root module's variables.
	VarsFile = "terraform.tfvars.json"
)

// Role is what a module provisions.
type Role string

const (
	// RoleCluster provisions what a whole cluster shares.
	RoleCluster Role = "cluster"
	// RoleMachine provisions one machine.
	RoleMachine Role = "machine"
	// RoleMachinePool provisions a group of machines.
	RoleMachinePool Role = "machinepool"
)

// RoleOf returns the module role of a CAPTF kind (captfv1.Kinds).
func RoleOf(kind string) (Role, error) {
	if k, ok := captfv1.LookupKind(kind); ok {
		return Role(k.Role), nil
	}
	return "", fmt.Errorf("contract: %q is not a CAPTF kind", kind)
}

// KindShort abbreviates a CAPTF kind in object names: c, m or mp (captfv1.Kinds).
func KindShort(kind string) string {
	if k, ok := captfv1.LookupKind(kind); ok {
		return k.Short
	}
	return "x"
}

// Common inputs every role receives.
const (
	InputContract = "captf_contract"
	InputCluster  = "captf_cluster"
	InputObject   = "captf_object"
	InputTags     = "captf_tags"
	// InputClusterOutputs carries the cluster's exports to machines and pools.
	InputClusterOutputs = "captf_cluster_outputs"
)

// RoleInputs lists the contract inputs of each role besides the common captf_* ones. User
// variables may not use these names.
var RoleInputs = map[Role][]string{
	RoleCluster: {
		"control_plane_endpoint", "kubernetes_version", "control_plane_initialized", "cluster_network",
	},
	RoleMachine: {
		"machine_name", "bootstrap_data", "bootstrap_format", "failure_domain", "kubernetes_version",
		"control_plane",
	},
	RoleMachinePool: {
		"machinepool_name", "replicas", "bootstrap_data", "bootstrap_format", "failure_domains",
		"cluster_failure_domains", "kubernetes_version", "node_labels", "autoscaling",
		"current_instances", "instances_to_remove",
	},
}

// SensitiveInputs are declared sensitive in the generated root module.
var SensitiveInputs = map[string]bool{"bootstrap_data": true}

// RoleOutputs lists the outputs each role must declare (a null value means "not known yet").
var RoleOutputs = map[Role][]string{
	RoleCluster:     {"health", "control_plane_endpoint", "failure_domains", "exports"},
	RoleMachine:     {"health", "provider_id", "addresses", "failure_domain"},
	RoleMachinePool: {"health", "provider_id", "provider_id_list", "replicas", "instances"},
}

// PublicOutput reports a contract output whose value is no secret: CAPTF copies it onto the CAPI
// objects (a cluster's endpoint and failure domains, a machine's provider ID, addresses and
// failure domain, a pool's provider IDs, replicas and instances, every role's health). The
// generated root module re-exports every contract output as sensitive; plan views show these
// anyway, so an approver sees what a plan does to the contract. The cluster's exports, which may
// carry secrets to machines and pools, are not public.
func PublicOutput(name string) bool {
	if name == OutputExports {
		return false
	}
	for _, outs := range RoleOutputs {
		for _, o := range outs {
			if o == name {
				return true
			}
		}
	}
	return false
}

// Outputs the manager reads by name beyond the contract's list.
const (
	// OutputExports is the cluster's exports, passed to machines and pools (sensitive).
	OutputExports = "exports"
	// OutputControlPlaneEndpoint is the cluster's control-plane endpoint, latched once.
	OutputControlPlaneEndpoint = "control_plane_endpoint"
)

// IsReservedVariable reports whether a user variable name collides with the contract for a role.
func IsReservedVariable(role Role, name string) bool {
	if len(name) >= 6 && name[:6] == "captf_" {
		return true
	}
	switch name {
	case "source", "version", "providers", "count", "for_each", "depends_on", "lifecycle", "locals":
		return true
	}
	for _, in := range RoleInputs[role] {
		if in == name {
			return true
		}
	}
	return false
}

// StateSuffix is the kubernetes backend's secret_suffix for an object: 16 hex characters of
// sha256("<namespace>/<kind>/<name>") and the kind's short name. It derives from the object's
// identity, never its UID, so the state is found again after clusterctl move; and it never
// ends in -<digits>, which the backend would mistake for a chunk.
func StateSuffix(namespace, kind, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + kind + "/" + name))
	return hex.EncodeToString(sum[:])[:16] + "-" + KindShort(kind)
}

// StateSecretName is the base state Secret of a suffix; larger states continue in
// <name>-part-<N> chunks.
func StateSecretName(suffix string) string { return "tfstate-default-" + suffix }

// LockLeaseName is the Lease the backend locks the state with.
func LockLeaseName(suffix string) string { return "lock-tfstate-default-" + suffix }

// Labels the kubernetes backend itself puts on its state Secrets.
const (
	BackendStateLabel     = "tfstate"
	BackendSuffixLabel    = "tfstateSecretSuffix"
	BackendWorkspaceLabel = "tfstateWorkspace"
	// BackendStateKey is the data key holding the gzip-compressed state.
	BackendStateKey = "tfstate"
	// LockInfoAnnotation on the lock Lease holds the lock's JSON info.
	LockInfoAnnotation = "app.terraform.io/lock-info"
	// BackendManagedByLabel is set to "terraform" by the backend (OpenTofu's too) on its state
	// Secrets and lock Lease.
	BackendManagedByLabel = "app.kubernetes.io/managed-by"
	// StateChunkInfix joins the base state Secret's name and a chunk index in the names of the
	// chunks Terraform splits a large state into: <base>-part-<N>, N >= 1.
	StateChunkInfix = "-part-"
)
