package podcheck

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestSecretsReadable(t *testing.T) {
	pod := func(user, group *int64) corev1.PodSpec {
		return corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: user, FSGroup: group},
			Containers:      []corev1.Container{{Name: "c", VolumeMounts: []corev1.VolumeMount{{Name: "creds", MountPath: "/creds"}}}},
			Volumes:         []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}},
		}
	}
	if err := SecretsReadable(pod(ptr.To[int64](65532), nil)); err == nil {
		t.Error("a non-root user without fsGroup passed")
	}
	for name, spec := range map[string]corev1.PodSpec{
		"fsGroup": pod(ptr.To[int64](65532), ptr.To[int64](65532)),
		"root":    pod(nil, nil),
	} {
		if err := SecretsReadable(spec); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
