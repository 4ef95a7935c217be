package jobs

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/savedplan"
	"github.com/capx-io/capx/internal/captf/statekey"
)

// Containers of a Job's Pod.
const (
	// RunnerContainer is the init container that copies the runner into the Pod.
	RunnerContainer = "runner"
	// SourceContainer runs the runner inside the module image; its termination message is the
	// run's result document.
	SourceContainer = "source"
)

// Fixed parts of the Pod.
const (
	// ManagerBinary is the manager's path in its image; `manager runner copy` is the init step.
	ManagerBinary = "/manager"
	// StopTimeout is how long the runner may take after SIGTERM; TerminationGracePeriod leaves
	// it 30 s more to write its result before the kubelet kills the container.
	StopTimeout            = "570s"
	TerminationGracePeriod = 600
	// RunAsID is the user, group and fsGroup of every container: the module image contract's
	// recommended non-root user, and the group that makes the 0440 Secret files readable.
	RunAsID = 65532
	// SafeToEvictAnnotation tells the cluster autoscaler not to evict a Pod for a scale-down.
	SafeToEvictAnnotation = "cluster-autoscaler.kubernetes.io/safe-to-evict"
)

// Volumes of the Pod.
const (
	volumeRunner = "runner"
	volumeWork   = "work"
	volumeTmp    = "tmp"
	volumeConfig = "config"
	volumeCreds  = "creds"
	volumeToken  = "kube-api-access"
	// volumeStateKeyToken holds the token of the state key audience (StateEncryption).
	volumeStateKeyToken = "state-key-token"
	secretMode          = int32(0o440)
)

// Bounds on what a Job's Pod may write to its node's disk: a module cannot fill the node. The
// emptyDir limits are enforced by the kubelet's eviction manager; the containers'
// ephemeral-storage limits cover their writable layers and logs as well.
var (
	// runnerDirLimit holds the copied runner binary.
	runnerDirLimit = resource.MustParse("256Mi")
	// workDirLimit holds the root module, .terraform (providers the image does not carry) and
	// saved plans.
	workDirLimit = resource.MustParse("4Gi")
	// tmpDirLimit is the module's scratch space.
	tmpDirLimit = resource.MustParse("1Gi")
	// DefaultEphemeralStorage is the module container's ephemeral-storage limit unless
	// spec.jobs.resources sets one.
	DefaultEphemeralStorage = resource.MustParse("6Gi")
	// runnerEphemeralStorage bounds the init container (the copy lands in the runner emptyDir).
	runnerEphemeralStorage = resource.MustParse("512Mi")
)

// serviceAccountDir is where Kubernetes mounts a ServiceAccount token; the kubernetes backend's
// in_cluster_config reads it there.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// tokenExpirySeconds is the projected token's lifetime; the kubelet renews it well before.
const tokenExpirySeconds = 3607

// Params is everything one Job depends on. The caller resolves it all (the effective policy,
// the image to run, the attempt) so that Build stays a pure function.
type Params struct {
	// Owner is the CAPTF object the Job runs for.
	Owner Owner
	// Op is the operation (contract.OpApply, ...).
	Op string
	// Attempt counts this op's consecutive failures plus one.
	Attempt int
	// InputsHash is the hash of the rendered inputs the Job runs (for a destroy, those of the
	// durable copy). It is recorded on the Job and part of its name.
	InputsHash string
	// Policy is the object's effective Job policy.
	Policy Policy
	// ManagerImage is the manager's own image: its binary is the runner.
	ManagerImage string
	// Source is the module image and its pull policy; Image may be a pinned repo@digest.
	Source captfv1.WorkspaceSource
	// CredentialsSecret names the Secret whose keys reach the module as environment
	// variables and files; "" for none.
	CredentialsSecret string
	// ForceUnlock is the ID of a stale state lock of one of our own runs to remove after init.
	ForceUnlock string
	// Guard names what an apply that stops before a delete or replace waits for an approval of
	// (the runner plans every apply first and stops so unless it applies an approved plan).
	Guard *Guard
	// ExpectPlan is the approved plan's hash: the apply applies that plan's saved plan
	// (SavedPlan) and nothing else. No Job is given the plan key: the manager computes and
	// checks every plan hash itself.
	ExpectPlan string
	// SavedPlan is the approved plan's saved plan, as the manager verified it against
	// ExpectPlan; nil when it could not (the runner then applies nothing and reports its new
	// plan) or when the approved plan changed nothing (ExpectPlan is planhash.Empty).
	SavedPlan *SavedPlan
	// Restore describes the backup a restore Job pushes.
	Restore *Restore
	// StateEncryption is how the Job's OpenTofu encrypts the state; nil for no encryption.
	StateEncryption *StateEncryption
}

// StateEncryption is what a Job needs for OpenTofu's state encryption (package statekey): the
// mode, and where its runner fetches its state key. The key itself is never in the Job.
type StateEncryption struct {
	// Mode is statekey.Encrypt or statekey.Decrypt.
	Mode string
	// URL is the manager's state key endpoint.
	URL string
	// CAPEM is the endpoint's certificate, as PEM (public).
	CAPEM string
}

// Guard is what a stopped apply waits for.
type Guard struct {
	// Hash is the inputs hash an approval of the stopped apply's plan is for (pools: the
	// approval hash), named in the runner's message.
	Hash string
}

// SavedPlan is the approved saved plan an approved apply applies.
type SavedPlan struct {
	// Chunks are the saved plan's Secrets in chunk order; each one's data is projected to
	// <config>/saved-plan/<i>.
	Chunks []string
	// Digest is the hex SHA-256 of the chunks' data, as the manager verified it; the runner
	// refuses chunks with another.
	Digest string
}

// Restore is the backup a restore Job pushes.
type Restore struct {
	// Serial is the backup's state serial.
	Serial int64
	// Chunks are the backup's Secrets in chunk order; each one's "tfstate" key is projected to
	// <config>/restore/<i>.
	Chunks []string
	// Resources is the number of managed resources the backup counted (0 skips the check).
	Resources int
	// Digest is the hex SHA-256 of the chunks' data, as the manager verified it; the runner
	// refuses chunks with another ("" skips the check).
	Digest string
}

// Name is the Job's name (see Name).
func (p Params) Name() string {
	return Name(p.Owner.Kind, p.Owner.Name, p.Op, p.Attempt, p.InputsHash)
}

// Validate reports Params the runner would refuse with a usage error (a controller bug, not a
// module failure), so the reconciler can fail before creating a Job that cannot run.
func (p Params) Validate() error {
	switch {
	case !ops[p.Op]:
		return fmt.Errorf("jobs: unknown operation %q", p.Op)
	case p.Attempt < 0:
		return fmt.Errorf("jobs: negative attempt %d", p.Attempt)
	case p.Owner.Namespace == "" || p.Owner.Name == "" || p.Owner.UID == "":
		return errors.New("jobs: the owner's namespace, name and UID are required")
	case p.ManagerImage == "" || p.Source.Image == "":
		return errors.New("jobs: the manager image and the module image are required")
	case (p.Guard != nil || p.ExpectPlan != "" || p.SavedPlan != nil) && p.Op != contract.OpApply:
		return fmt.Errorf("jobs: a guard or an approved plan applies only to %s, not %s", contract.OpApply, p.Op)
	case p.Guard != nil && p.Guard.Hash == "":
		return errors.New("jobs: a guarded apply needs the hash deletes are approved for")
	case p.SavedPlan != nil && (p.ExpectPlan == "" || p.SavedPlan.Digest == "" ||
		len(p.SavedPlan.Chunks) == 0 || len(p.SavedPlan.Chunks) > savedplan.MaxChunks):
		return fmt.Errorf("jobs: a saved plan needs the approved hash, its digest and 1 to %d chunk Secrets", savedplan.MaxChunks)
	case p.Op == contract.OpRestore && (p.Restore == nil || len(p.Restore.Chunks) == 0):
		return errors.New("jobs: a restore Job needs the backup's chunk Secrets")
	case p.Op != contract.OpRestore && p.Restore != nil:
		return fmt.Errorf("jobs: a %s Job restores nothing", p.Op)
	case p.StateEncryption != nil && (p.StateEncryption.URL == "" || p.StateEncryption.CAPEM == "" ||
		(p.StateEncryption.Mode != string(statekey.Encrypt) && p.StateEncryption.Mode != string(statekey.Decrypt))):
		return errors.New("jobs: state encryption needs the mode (encrypt or decrypt), the key endpoint and its certificate")
	}
	return p.Policy.Validate()
}

// Build returns the Job of one operation. It is pure: the same Params give the same Job.
func Build(p Params) *batchv1.Job {
	name := p.Name()
	labels := p.Owner.Labels()
	labels[captfv1.OperationLabel] = p.Op
	labels[captfv1.AttemptLabel] = strconv.Itoa(p.Attempt)
	if p.Owner.WatchFilter != "" {
		labels[clusterv1.WatchLabel] = p.Owner.WatchFilter
	}
	annotations := map[string]string{}
	if p.InputsHash != "" {
		annotations[captfv1.InputsHashAnnotation] = p.InputsHash
	}
	if p.ExpectPlan != "" {
		annotations[captfv1.PlanHashAnnotation] = p.ExpectPlan
	}
	if p.Restore != nil {
		annotations[captfv1.RestoreSerialAnnotation] = strconv.FormatInt(p.Restore.Serial, 10)
	}
	var podAnnotations map[string]string
	if p.Op == contract.OpApply || p.Op == contract.OpDestroy || p.Op == contract.OpRestore {
		// Evicting a Pod mid-apply interrupts the module and can leave the state locked.
		podAnnotations = map[string]string{SafeToEvictAnnotation: "false"}
	}

	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       p.Owner.Namespace,
			Name:            name,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{p.Owner.ControllerRef()},
		},
		Spec: batchv1.JobSpec{
			// A failed run is retried by the controller with a new attempt (and backoff), never
			// by the Job controller: each attempt must be a separate, accountable Job.
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To(p.Policy.ActiveDeadlineSeconds),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels), Annotations: podAnnotations},
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyNever,
					ServiceAccountName: p.Policy.ServiceAccountName,
					// The token reaches only the module container, which needs it for the
					// backend's in_cluster_config and for Events; the init container that copies
					// the runner gets none (see tokenVolume).
					AutomountServiceAccountToken:  ptr.To(false),
					EnableServiceLinks:            ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To[int64](TerminationGracePeriod),
					ImagePullSecrets:              slices.Clone(p.Policy.ImagePullSecrets),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](RunAsID),
						RunAsGroup:     ptr.To[int64](RunAsID),
						FSGroup:        ptr.To[int64](RunAsID),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					InitContainers: []corev1.Container{runnerContainer(p)},
					Containers:     []corev1.Container{sourceContainer(p)},
					Volumes:        volumes(p, name),
				},
			},
		},
	}
}

func runnerContainer(p Params) corev1.Container {
	return corev1.Container{
		Name:            RunnerContainer,
		Image:           p.ManagerImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{ManagerBinary, "runner", "copy", contract.RunnerPath},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
				corev1.ResourceEphemeralStorage: runnerEphemeralStorage},
		},
		VolumeMounts:             []corev1.VolumeMount{{Name: volumeRunner, MountPath: contract.BinDir}},
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          containerSecurity(),
	}
}

func sourceContainer(p Params) corev1.Container {
	pull := p.Source.ImagePullPolicy
	if pull == "" {
		pull = corev1.PullIfNotPresent
	}
	env := []corev1.EnvVar{
		{Name: "TF_IN_AUTOMATION", Value: "1"},
		{Name: "TF_INPUT", Value: "0"},
		{Name: "HOME", Value: contract.WorkDir},
		{Name: "TMPDIR", Value: "/tmp"},
		{Name: "KUBE_NAMESPACE", Value: p.Owner.Namespace},
		{Name: "CHECKPOINT_DISABLE", Value: "1"},
	}
	for _, e := range p.Policy.Env {
		if !RunnerOwnsEnv(e.Name) {
			env = append(env, *e.DeepCopy())
		}
	}
	mounts := []corev1.VolumeMount{
		{Name: volumeRunner, MountPath: contract.BinDir, ReadOnly: true},
		{Name: volumeWork, MountPath: contract.WorkDir},
		{Name: volumeTmp, MountPath: "/tmp"},
		{Name: volumeConfig, MountPath: contract.ConfigDir, ReadOnly: true},
		{Name: volumeToken, MountPath: serviceAccountDir, ReadOnly: true},
	}
	if p.StateEncryption != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: volumeStateKeyToken, MountPath: path.Dir(statekey.TokenPath), ReadOnly: true})
	}
	var envFrom []corev1.EnvFromSource
	if p.CredentialsSecret != "" {
		envFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: p.CredentialsSecret},
		}}}
		mounts = append(mounts, corev1.VolumeMount{Name: volumeCreds, MountPath: contract.CredentialsDir, ReadOnly: true})
	}
	return corev1.Container{
		Name:                     SourceContainer,
		Image:                    p.Source.Image,
		ImagePullPolicy:          pull,
		Command:                  []string{contract.RunnerPath, "run"},
		Args:                     runnerArgs(p),
		Env:                      env,
		EnvFrom:                  envFrom,
		Resources:                moduleResources(p.Policy.Resources),
		VolumeMounts:             mounts,
		TerminationMessagePath:   contract.TerminationLog,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          containerSecurity(),
	}
}

// runnerArgs are the flags of `runner run` (internal/captf/runner). Paths are left at the
// runner's defaults, which are the contract's paths this Job mounts.
func runnerArgs(p Params) []string {
	args := []string{
		"--op=" + p.Op,
		"--image=" + p.Source.Image,
		"--lock-timeout=" + strconv.Itoa(int(p.Policy.LockTimeoutSeconds)) + "s",
		"--stop-timeout=" + StopTimeout,
		"--backend-config=secret_suffix=" + p.Owner.StateSuffix(),
		"--backend-config=namespace=" + p.Owner.Namespace,
		"--backend-config=in_cluster_config=true",
		// The state Secrets carry the owner's labels and clusterctl's move label, so the state
		// is found by the owner's selector and moves with the object.
		"--backend-config=labels=" + hclMap(p.Owner.MoveLabels()),
		// Progress Events go on the object, naming this Job.
		"--event-object=" + captfv1.GroupVersion.String() + "/" + p.Owner.Kind + "/" + p.Owner.Namespace + "/" +
			p.Owner.Name + "/" + string(p.Owner.UID),
		"--job-name=" + p.Name(),
	}
	// The runner redacts the values the Job fills from Secrets, whatever their names.
	for _, e := range p.Policy.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && !RunnerOwnsEnv(e.Name) {
			args = append(args, "--secret-env="+e.Name)
		}
	}
	if p.ForceUnlock != "" {
		args = append(args, "--force-unlock="+p.ForceUnlock)
	}
	if e := p.StateEncryption; e != nil {
		args = append(args, "--state-encryption="+e.Mode, "--state-key-url="+e.URL, "--state-key-ca="+e.CAPEM)
	}
	if g := p.Guard; g != nil && p.Op == contract.OpApply {
		args = append(args, "--inputs-hash="+g.Hash)
	}
	if p.ExpectPlan != "" && p.Op == contract.OpApply {
		args = append(args, "--expect-plan="+p.ExpectPlan)
		if sp := p.SavedPlan; sp != nil {
			args = append(args, "--saved-plan-chunks="+strconv.Itoa(len(sp.Chunks)), "--saved-plan-digest="+sp.Digest)
		}
	}
	if r := p.Restore; r != nil && p.Op == contract.OpRestore {
		args = append(args, "--restore-chunks="+strconv.Itoa(len(r.Chunks)), "--restore-resources="+strconv.Itoa(r.Resources))
		if r.Digest != "" {
			args = append(args, "--restore-digest="+r.Digest)
		}
	}
	return args
}

// hclMap writes labels as the HCL object -backend-config parses for a map attribute:
// {"k"="v",...}, keys sorted. Label keys and values cannot contain quotes, backslashes or
// template sequences, so quoting needs no escapes.
func hclMap(m map[string]string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + k + `"="` + m[k] + `"`)
	}
	b.WriteByte('}')
	return b.String()
}

func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Privileged:               ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](RunAsID),
		RunAsGroup:               ptr.To[int64](RunAsID),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// moduleResources is the policy's resources with the default ephemeral-storage limit added when
// the policy sets none.
func moduleResources(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *r.DeepCopy()
	if _, ok := out.Limits[corev1.ResourceEphemeralStorage]; !ok {
		if out.Limits == nil {
			out.Limits = corev1.ResourceList{}
		}
		out.Limits[corev1.ResourceEphemeralStorage] = DefaultEphemeralStorage
	}
	return out
}

func volumes(p Params, jobName string) []corev1.Volume {
	empty := func(name string, limit resource.Quantity) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}
	}
	vols := []corev1.Volume{
		empty(volumeRunner, runnerDirLimit), empty(volumeWork, workDirLimit), empty(volumeTmp, tmpDirLimit),
		configVolume(p, jobName), tokenVolume(),
	}
	if p.StateEncryption != nil {
		// Only the manager's state key endpoint accepts this token; the API server does not.
		vols = append(vols, corev1.Volume{Name: volumeStateKeyToken, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To(int32(0o444)),
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: statekey.Audience, Path: path.Base(statekey.TokenPath), ExpirationSeconds: ptr.To[int64](tokenExpirySeconds)}}},
		}}})
	}
	if p.CredentialsSecret != "" {
		vols = append(vols, corev1.Volume{Name: volumeCreds, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: p.CredentialsSecret, DefaultMode: ptr.To(secretMode),
		}}})
	}
	return vols
}

// tokenVolume is what automounting would give every container (a bound token, the cluster's CA
// and the namespace), as a volume the module container alone mounts.
func tokenVolume() corev1.Volume {
	return corev1.Volume{Name: volumeToken, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To(int32(0o444)),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](tokenExpirySeconds)}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
				Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			}}}},
		},
	}}}
}

// configVolume mounts the per-run Secret at contract.ConfigDir. A restore Job projects the
// backup's chunk Secrets beside it, chunk i's state as restore/<i>, which is where the runner
// assembles the state from; an approved apply projects the approved saved plan's chunk Secrets,
// chunk i as saved-plan/<i>.
func configVolume(p Params, jobName string) corev1.Volume {
	run := RunSecretName(jobName)
	var chunks []corev1.VolumeProjection
	project := func(secret, key, dir string, i int) {
		chunks = append(chunks, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret},
			Items:                []corev1.KeyToPath{{Key: key, Path: path.Join(dir, strconv.Itoa(i))}},
		}})
	}
	if p.Restore != nil && p.Op == contract.OpRestore {
		for i, chunk := range p.Restore.Chunks {
			project(chunk, contract.BackendStateKey, contract.RestoreDir, i)
		}
	}
	if p.SavedPlan != nil && p.Op == contract.OpApply && p.ExpectPlan != "" {
		for i, chunk := range p.SavedPlan.Chunks {
			project(chunk, savedplan.DataKey, contract.SavedPlanDir, i)
		}
	}
	if len(chunks) == 0 {
		return corev1.Volume{Name: volumeConfig, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: run, DefaultMode: ptr.To(secretMode),
		}}}
	}
	sources := append([]corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: run}}}}, chunks...)
	return corev1.Volume{Name: volumeConfig, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: sources, DefaultMode: ptr.To(secretMode),
	}}}
}
