package jobs

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

func TestEffective(t *testing.T) {
	env := func(kv ...string) []corev1.EnvVar {
		var out []corev1.EnvVar
		for i := 0; i < len(kv); i += 2 {
			out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	secrets := func(names ...string) []corev1.LocalObjectReference {
		var out []corev1.LocalObjectReference
		for _, n := range names {
			out = append(out, corev1.LocalObjectReference{Name: n})
		}
		return out
	}
	small := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
	big := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}}
	defaults := Policy{
		SuccessfulJobsHistoryLimit: 3, FailedJobsHistoryLimit: 3, ActiveDeadlineSeconds: 3600, LockTimeoutSeconds: 300,
		ServiceAccountName: "captf-runner", Resources: DefaultResources(),
	}

	tests := []struct {
		name   string
		layers []*captfv1.JobPolicy
		want   func(*Policy)
	}{
		{name: "built-in defaults", want: func(*Policy) {}},
		{name: "nil layers", layers: []*captfv1.JobPolicy{nil, nil}, want: func(*Policy) {}},
		{
			name: "own fields win over the cluster's defaults, which win over the built-in ones",
			layers: []*captfv1.JobPolicy{
				{ActiveDeadlineSeconds: ptr.To[int64](600), ServiceAccountName: "own"},
				{ActiveDeadlineSeconds: ptr.To[int64](7200), LockTimeoutSeconds: ptr.To[int32](60), ServiceAccountName: "cluster",
					SuccessfulJobsHistoryLimit: ptr.To[int32](0)},
			},
			want: func(p *Policy) {
				p.ActiveDeadlineSeconds, p.LockTimeoutSeconds, p.ServiceAccountName, p.SuccessfulJobsHistoryLimit = 600, 60, "own", 0
			},
		},
		{
			name:   "resources replace wholesale",
			layers: []*captfv1.JobPolicy{{Resources: &small}, {Resources: &big}},
			want:   func(p *Policy) { p.Resources = small },
		},
		{
			name:   "the cluster's resources replace the built-in ones",
			layers: []*captfv1.JobPolicy{{}, {Resources: &big}},
			want:   func(p *Policy) { p.Resources = big },
		},
		{
			name: "env merges by name, the own value winning",
			layers: []*captfv1.JobPolicy{
				{Env: env("B", "own", "C", "own")},
				{Env: env("A", "cluster", "B", "cluster")},
			},
			want: func(p *Policy) { p.Env = env("A", "cluster", "B", "own", "C", "own") },
		},
		{
			name: "pull secrets are the union",
			layers: []*captfv1.JobPolicy{
				{ImagePullSecrets: secrets("own", "shared")},
				{ImagePullSecrets: secrets("shared", "cluster")},
			},
			want: func(p *Policy) { p.ImagePullSecrets = secrets("own", "shared", "cluster") },
		},
		{
			name:   "variables the runner owns are dropped",
			layers: []*captfv1.JobPolicy{{Env: env("TF_LOG", "DEBUG", "HTTPS_PROXY", "p", "KUBE_CONFIG_PATH", "x", "HOME", "/", "KUBERNETES_SERVICE_HOST", "h")}},
			want: func(p *Policy) {
				p.Env = env("HTTPS_PROXY", "p")
				p.DroppedEnv = []string{"TF_LOG", "KUBE_CONFIG_PATH", "HOME", "KUBERNETES_SERVICE_HOST"}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := defaults
			want.Resources = DefaultResources()
			tt.want(&want)
			NewWithT(t).Expect(Effective(tt.layers...)).To(Equal(want))
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Effective().Validate()).To(Succeed())
	p := Effective(&captfv1.JobPolicy{ActiveDeadlineSeconds: ptr.To[int64](300)})
	g.Expect(p.Validate()).To(MatchError(ContainSubstring("lockTimeoutSeconds (300) is not shorter than activeDeadlineSeconds (300)")))
}

// TestPolicySpecAndReferences: a policy written back as a JobPolicy resolves to itself, and what
// it reads besides the credentials is listed once each and renamed in place.
func TestPolicySpecAndReferences(t *testing.T) {
	g := NewWithT(t)
	secretRef := func(name string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}}
	}
	mapRef := func(name string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}}
	}
	own := &captfv1.JobPolicy{
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
		Env: []corev1.EnvVar{
			{Name: "A", ValueFrom: secretRef("vault")}, {Name: "B", ValueFrom: secretRef("registry")},
			{Name: "C", ValueFrom: mapRef("region")}, {Name: "D", Value: "plain"},
			{Name: "E", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		},
		ActiveDeadlineSeconds: ptr.To[int64](60),
	}
	defaults := &captfv1.JobPolicy{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "mirror"}}, LockTimeoutSeconds: ptr.To[int32](9)}
	p := Effective(own, defaults)
	g.Expect(Effective(p.Spec())).To(Equal(p), "Spec resolves to the same policy on its own")

	secrets, configMaps := p.References()
	g.Expect(secrets).To(Equal([]string{"registry", "mirror", "vault"}))
	g.Expect(configMaps).To(Equal([]string{"region"}))

	spec := p.Spec()
	RenameReferences(spec, func(s string) string { return "s-" + s }, func(s string) string { return "m-" + s })
	secrets, configMaps = Effective(spec).References()
	g.Expect(secrets).To(Equal([]string{"s-registry", "s-mirror", "s-vault"}))
	g.Expect(configMaps).To(Equal([]string{"m-region"}))
	g.Expect(own.Env[0].ValueFrom.SecretKeyRef.Name).To(Equal("vault"), "the object's own policy is left alone")
}
