package addons_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/addons"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/vco"
)

// TestCredentialCopiesCarryCABundle: the cloud controller manager and the CSI driver reach the
// same whitesky.cloud as the manager, behind the same private CA, so the credential copy each
// gets carries caBundle (which both read from their mounted Secret), and never allowHTTP.
func TestCredentialCopiesCarryCABundle(t *testing.T) {
	vc := testenv.VCOCluster("team-a", "c", "c", "nl-rmd-dc01-001", "vco-credentials")
	vc.Spec.Addons.CSI = &capvcov1.CSIAddonSpec{CredentialsSecretRef: corev1.LocalObjectReference{Name: "vco-disks"}}
	s := addons.Settings{VCOCluster: vc, ClusterName: "c", Version: "v0.1.0", ImageRepository: "ghcr.io/capx-io"}
	for _, a := range []addons.Addon{addons.CloudControllerManager{}, addons.CSIDriver{}} {
		r, err := a.Render(s)
		if err != nil {
			t.Fatalf("%s: %v", a.Name(), err)
		}
		if len(r.Secrets) == 0 {
			t.Fatalf("%s copies no credential", a.Name())
		}
		keys := r.Secrets[0].Keys
		if !slices.Contains(keys, vco.SecretKeyCABundle) || slices.Contains(keys, vco.SecretKeyAllowHTTP) {
			t.Errorf("%s copies the keys %v: want caBundle among them, and never allowHTTP", a.Name(), keys)
		}
	}
}
