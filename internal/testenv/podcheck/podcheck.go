// Package podcheck checks rendered Pod specs for what only a real kubelet would show.
package podcheck

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// SecretsReadable fails unless every Secret volume of a Pod that runs as a non-root user is
// readable by it: the kubelet writes a Secret volume's files as root with the volume's mode, so
// a non-root user reads them only through fsGroup (the files become the group's, group-readable).
// Without it the program exits at start with "permission denied" on a real node, while the API
// server accepts the manifest.
func SecretsReadable(spec corev1.PodSpec) error {
	user := int64(0)
	if sc := spec.SecurityContext; sc != nil && sc.RunAsUser != nil {
		user = *sc.RunAsUser
	}
	for _, c := range spec.Containers {
		u := user
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			u = *c.SecurityContext.RunAsUser
		}
		if u == 0 {
			continue
		}
		for _, m := range c.VolumeMounts {
			for _, v := range spec.Volumes {
				if v.Name != m.Name || v.Secret == nil {
					continue
				}
				if spec.SecurityContext == nil || spec.SecurityContext.FSGroup == nil {
					return fmt.Errorf("container %s runs as user %d and mounts Secret volume %s, but the Pod sets no fsGroup: the files are root's and it cannot read them", c.Name, u, v.Name)
				}
			}
		}
	}
	return nil
}
