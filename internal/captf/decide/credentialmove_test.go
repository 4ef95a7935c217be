package decide_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	"github.com/capx-io/capx/internal/captf/decide"
)

// TestCredentialMove: a credential Secret is labelled for clusterctl move only when everything
// known to read it moves too, and the manager only ever removes a label it set.
func TestCredentialMove(t *testing.T) {
	moving := []decide.SecretUse{{Who: "TerraformCluster/prod", Moves: true}, {Who: "TerraformMachinePool/workers", Moves: true}}
	moveLabel := map[string]string{clusterctlv1.ClusterctlMoveLabel: ""}
	ourMark := map[string]string{decide.MoveLabelSetAnnotation: "true"}
	for _, tc := range []struct {
		name string
		in   decide.CredentialMoveInput
		want decide.CredentialMove
	}{
		{"read only by objects that move: labelled",
			decide.CredentialMoveInput{Uses: moving},
			decide.CredentialMove{Action: decide.MoveLabelSet, Moves: true}},
		{"already labelled by the manager: kept",
			decide.CredentialMoveInput{Labels: moveLabel, Annotations: ourMark, Uses: moving},
			decide.CredentialMove{Moves: true}},
		{"shared with a CAPTF object outside any Cluster: not labelled",
			decide.CredentialMoveInput{Uses: append(moving, decide.SecretUse{Who: "TerraformCluster/orphan"})},
			decide.CredentialMove{Reason: "read by what stays behind: TerraformCluster/orphan"}},
		{"shared with a Pod: not labelled",
			decide.CredentialMoveInput{Uses: append(moving, decide.SecretUse{Who: "Pod/web-1"}, decide.SecretUse{Who: "Pod/web-0"})},
			decide.CredentialMove{Reason: "read by what stays behind: Pod/web-0, Pod/web-1"}},
		{"the manager's label on a Secret now shared: removed",
			decide.CredentialMoveInput{Labels: moveLabel, Annotations: ourMark, Uses: append(moving, decide.SecretUse{Who: "Pod/web-0"})},
			decide.CredentialMove{Action: decide.MoveLabelRemove, Reason: "read by what stays behind: Pod/web-0"}},
		{"a person's label on a shared Secret: theirs, kept, moves",
			decide.CredentialMoveInput{Labels: moveLabel, Uses: append(moving, decide.SecretUse{Who: "Pod/web-0"})},
			decide.CredentialMove{Moves: true}},
		{"owned by another object: not labelled",
			decide.CredentialMoveInput{Owners: []string{"ExternalSecret/cloud"}, Uses: moving},
			decide.CredentialMove{Reason: "it is owned by ExternalSecret/cloud: clusterctl moves it only with its owners"}},
		{"opted out: not labelled",
			decide.CredentialMoveInput{Labels: map[string]string{decide.MoveOptOutLabel: "false"}, Uses: moving},
			decide.CredentialMove{Reason: "it is labelled captf.io/move=false"}},
		{"opted out after the manager labelled it: removed",
			decide.CredentialMoveInput{Labels: map[string]string{decide.MoveOptOutLabel: "false", clusterctlv1.ClusterctlMoveLabel: ""}, Annotations: ourMark, Uses: moving},
			decide.CredentialMove{Action: decide.MoveLabelRemove, Reason: "it is labelled captf.io/move=false"}},
		{"a ServiceAccount token: not labelled",
			decide.CredentialMoveInput{Type: corev1.SecretTypeServiceAccountToken, Uses: moving},
			decide.CredentialMove{Reason: "it is a ServiceAccount token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(decide.CredentialMoveOf(tc.in)).To(Equal(tc.want))
		})
	}
}
