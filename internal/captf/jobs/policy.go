package jobs

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// Built-in defaults of a JobPolicy.
const (
	DefaultSuccessfulJobsHistoryLimit = 3
	DefaultFailedJobsHistoryLimit     = 3
	DefaultActiveDeadlineSeconds      = 3600
	DefaultLockTimeoutSeconds         = 300
	// DefaultServiceAccountName is the runner account the manager maintains in each namespace.
	DefaultServiceAccountName = "captf-runner"
)

// DefaultResources of the module container: enough for OpenTofu with a few providers; no CPU
// limit, so a plan is never throttled into its deadline.
func DefaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("250m"),
			corev1.ResourceMemory: resource.MustParse("512Mi"),
		},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
}

// Policy is a JobPolicy with every field resolved.
type Policy struct {
	SuccessfulJobsHistoryLimit int32
	FailedJobsHistoryLimit     int32
	ActiveDeadlineSeconds      int64
	LockTimeoutSeconds         int32
	ServiceAccountName         string
	ImagePullSecrets           []corev1.LocalObjectReference
	Resources                  corev1.ResourceRequirements
	// Env are the user's variables for the module container.
	Env []corev1.EnvVar
	// DroppedEnv names variables left out of Env because the runner owns them (TF_*, KUBE_*,
	// KUBERNETES_*, HOME, TMPDIR, CHECKPOINT_DISABLE), for an event. Validation refuses them
	// on new objects; objects stored before that rule may still carry them.
	DroppedEnv []string
}

// Effective resolves the policy of an object from its layers, most specific first: for a
// machine or pool its own spec.jobs, then its TerraformCluster's spec.defaults.jobs; nil
// layers are skipped. A field takes the value of the first layer that sets it, else the
// built-in default. env merges by name (the more specific layer wins) and imagePullSecrets
// are the union; every other field is replaced whole, never merged, so a resources block
// means exactly what it says.
func Effective(layers ...*captfv1.JobPolicy) Policy {
	p := Policy{
		SuccessfulJobsHistoryLimit: DefaultSuccessfulJobsHistoryLimit,
		FailedJobsHistoryLimit:     DefaultFailedJobsHistoryLimit,
		ActiveDeadlineSeconds:      DefaultActiveDeadlineSeconds,
		LockTimeoutSeconds:         DefaultLockTimeoutSeconds,
		ServiceAccountName:         DefaultServiceAccountName,
		Resources:                  DefaultResources(),
	}
	// Apply from the least specific layer up, so each more specific one overrides.
	var env []corev1.EnvVar
	for _, l := range slices.Backward(layers) {
		if l == nil {
			continue
		}
		setIf(&p.SuccessfulJobsHistoryLimit, l.SuccessfulJobsHistoryLimit)
		setIf(&p.FailedJobsHistoryLimit, l.FailedJobsHistoryLimit)
		setIf(&p.ActiveDeadlineSeconds, l.ActiveDeadlineSeconds)
		setIf(&p.LockTimeoutSeconds, l.LockTimeoutSeconds)
		if l.ServiceAccountName != "" {
			p.ServiceAccountName = l.ServiceAccountName
		}
		if l.Resources != nil {
			p.Resources = *l.Resources.DeepCopy()
		}
		env = mergeEnv(env, l.Env)
	}
	for _, l := range layers {
		if l == nil {
			continue
		}
		for _, s := range l.ImagePullSecrets {
			if !slices.Contains(p.ImagePullSecrets, s) {
				p.ImagePullSecrets = append(p.ImagePullSecrets, s)
			}
		}
	}
	for _, e := range env {
		if RunnerOwnsEnv(e.Name) {
			p.DroppedEnv = append(p.DroppedEnv, e.Name)
			continue
		}
		p.Env = append(p.Env, e)
	}
	return p
}

// Spec is the policy as a JobPolicy that sets every field, so it resolves to the same policy
// on its own: the Jobs policy of an object's copy that leaves its TerraformCluster behind.
func (p Policy) Spec() *captfv1.JobPolicy {
	var env []corev1.EnvVar
	for _, e := range p.Env {
		env = append(env, *e.DeepCopy())
	}
	return &captfv1.JobPolicy{
		SuccessfulJobsHistoryLimit: &p.SuccessfulJobsHistoryLimit,
		FailedJobsHistoryLimit:     &p.FailedJobsHistoryLimit,
		ActiveDeadlineSeconds:      &p.ActiveDeadlineSeconds,
		LockTimeoutSeconds:         &p.LockTimeoutSeconds,
		ServiceAccountName:         p.ServiceAccountName,
		ImagePullSecrets:           slices.Clone(p.ImagePullSecrets),
		Resources:                  p.Resources.DeepCopy(),
		Env:                        env,
	}
}

func setIf[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

// mergeEnv overrides base's variables with over's of the same name, in place, and appends the
// others in over's order.
func mergeEnv(base, over []corev1.EnvVar) []corev1.EnvVar {
	out := slices.Clone(base)
	for _, e := range over {
		if i := slices.IndexFunc(out, func(b corev1.EnvVar) bool { return b.Name == e.Name }); i >= 0 {
			out[i] = *e.DeepCopy()
		} else {
			out = append(out, *e.DeepCopy())
		}
	}
	return out
}

// RunnerOwnsEnv reports whether the runner sets or clears an environment variable itself: a
// user value would change where state goes or how the runtime behaves.
func RunnerOwnsEnv(name string) bool {
	for _, prefix := range []string{"TF_", "KUBE_", "KUBERNETES_"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return name == "HOME" || name == "TMPDIR" || name == "CHECKPOINT_DISABLE"
}

// Validate reports a policy that cannot produce a working Job (the JobPolicyInvalid reason).
// Layers are validated one by one at admission, but their merge is not: a cluster's lock
// timeout can meet a machine's shorter deadline.
func (p Policy) Validate() error {
	if int64(p.LockTimeoutSeconds) >= p.ActiveDeadlineSeconds {
		return fmt.Errorf("jobs: the effective lockTimeoutSeconds (%d) is not shorter than activeDeadlineSeconds (%d): a Job could spend its whole deadline waiting for the state lock; set them so that the lock timeout is shorter",
			p.LockTimeoutSeconds, p.ActiveDeadlineSeconds)
	}
	return nil
}

// References are the Secrets and ConfigMaps a policy's Jobs read besides the credentials: the
// image pull Secrets and what env's valueFrom names. Each name once, in order.
func (p Policy) References() (secrets, configMaps []string) {
	add := func(list []string, name string) []string {
		if name == "" || slices.Contains(list, name) {
			return list
		}
		return append(list, name)
	}
	for _, s := range p.ImagePullSecrets {
		secrets = add(secrets, s.Name)
	}
	for _, e := range p.Env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			secrets = add(secrets, r.Name)
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			configMaps = add(configMaps, r.Name)
		}
	}
	return secrets, configMaps
}

// RenameReferences renames, in place, the Secrets and ConfigMaps a JobPolicy names (see
// References).
func RenameReferences(jp *captfv1.JobPolicy, secret, configMap func(string) string) {
	for i := range jp.ImagePullSecrets {
		jp.ImagePullSecrets[i].Name = secret(jp.ImagePullSecrets[i].Name)
	}
	for i := range jp.Env {
		vf := jp.Env[i].ValueFrom
		if vf == nil {
			continue
		}
		if vf.SecretKeyRef != nil {
			vf.SecretKeyRef.Name = secret(vf.SecretKeyRef.Name)
		}
		if vf.ConfigMapKeyRef != nil {
			vf.ConfigMapKeyRef.Name = configMap(vf.ConfigMapKeyRef.Name)
		}
	}
}
