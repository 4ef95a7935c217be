package decide

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
)

const (
	// MoveOptOutLabel set to "false" on a Secret keeps the manager from labelling it for
	// clusterctl move: for a Secret something CAPTF cannot see (a controller reading it by name)
	// also uses.
	MoveOptOutLabel = "captf.io/move"
	// MoveLabelSetAnnotation records that the manager, not a person, set clusterctl's move label
	// on a Secret, so the manager only ever removes a label it set itself.
	MoveLabelSetAnnotation = "captf.io/move-label-set"
)

// SecretUse is one object that reads a credential Secret.
type SecretUse struct {
	// Who names it: "TerraformMachine/m0", "Pod/web-0".
	Who string
	// Moves is true when clusterctl move carries it: a CAPTF object on its Cluster's owner
	// chain (owned by a Cluster, Machine or MachinePool). A Pod never moves.
	Moves bool
}

// CredentialMoveInput is what the decision reads of a credential Secret and its users.
type CredentialMoveInput struct {
	Labels, Annotations map[string]string
	// Owners are the Secret's owner references as Kind/name.
	Owners []string
	Type   corev1.SecretType
	// Uses are every object of the namespace known to read the Secret, CAPTF objects and Pods.
	Uses []SecretUse
}

// MoveLabel is what the manager does with clusterctl's move label on a credential Secret.
type MoveLabel int

const (
	// MoveLabelKeep leaves the Secret's labels as they are.
	MoveLabelKeep MoveLabel = iota
	// MoveLabelSet sets clusterctl.cluster.x-k8s.io/move (and the manager's annotation).
	MoveLabelSet
	// MoveLabelRemove removes the label and the annotation the manager set earlier.
	MoveLabelRemove
)

// CredentialMove is the decision about one credential Secret.
type CredentialMove struct {
	Action MoveLabel
	// Moves is true when, after the action, clusterctl move carries the Secret.
	Moves bool
	// Reason says why it does not move (empty when it does).
	Reason string
}

// CredentialMoveOf decides whether the credential Secret CAPTF objects read should carry
// clusterctl's move label. clusterctl move deletes what it moved from the source, so a Secret
// is labelled only when everything known to read it moves too: never when something that stays
// behind reads it (a CAPTF object outside a Cluster's owner chain, a Pod), never when it has
// owners of its own (clusterctl moves an owned Secret only with its owners, and the target's
// garbage collector deletes it when they do not come along), never a ServiceAccount token, and
// never against the MoveOptOutLabel. A label a person set is theirs: it is kept, and the Secret
// moves. A label the manager set is removed once the Secret no longer qualifies.
func CredentialMoveOf(in CredentialMoveInput) CredentialMove {
	_, labelled := in.Labels[clusterctlv1.ClusterctlMoveLabel]
	ours := labelled && in.Annotations[MoveLabelSetAnnotation] == "true"
	stay := func(reason string) CredentialMove {
		if ours {
			return CredentialMove{Action: MoveLabelRemove, Reason: reason}
		}
		return CredentialMove{Reason: reason}
	}
	if labelled && !ours {
		return CredentialMove{Moves: true}
	}
	if in.Labels[MoveOptOutLabel] == "false" {
		return stay(fmt.Sprintf("it is labelled %s=false", MoveOptOutLabel))
	}
	if in.Type == corev1.SecretTypeServiceAccountToken {
		return stay("it is a ServiceAccount token")
	}
	if len(in.Owners) > 0 {
		return stay(fmt.Sprintf("it is owned by %s: clusterctl moves it only with its owners", strings.Join(sorted(in.Owners), ", ")))
	}
	var behind []string
	for _, u := range in.Uses {
		if !u.Moves {
			behind = append(behind, u.Who)
		}
	}
	if len(behind) > 0 {
		return stay("read by what stays behind: " + strings.Join(sorted(behind), ", "))
	}
	if ours {
		return CredentialMove{Moves: true}
	}
	return CredentialMove{Action: MoveLabelSet, Moves: true}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
