package sriov

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
)

func secret(name string, kv ...string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{}}
	for i := 0; i < len(kv); i += 2 {
		s.Data[kv[i]] = []byte(kv[i+1])
	}
	return s
}

// TestReady is the rulebook of the SRIOVAgentReady condition: each way the agent cannot run is
// a False with its own reason and a message that says what to do.
func TestReady(t *testing.T) {
	enabled := &capvcov1.SRIOVSpec{Enabled: true, CredentialSecretRef: &corev1.LocalObjectReference{Name: "sriov-cred"}}
	cluster := secret("cluster-cred", "url", "https://vco.example/api/1", "customer", "acme", "jwt", "cluster-token")
	good := secret("sriov-cred", "url", "https://vco.example/api/1", "customer", "acme", "jwt", "sriov-token")
	ds := func(gen int64, st appsv1.DaemonSetStatus) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{Status: st}
		d.Generation = gen
		return d
	}
	ready := ds(2, appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, NumberReady: 3, NumberAvailable: 3, UpdatedNumberScheduled: 3})
	for _, tc := range []struct {
		name   string
		o      Observed
		reason string // "" means no condition
		status metav1.ConditionStatus
		says   string
	}{
		{name: "not enabled: no condition", o: Observed{Spec: &capvcov1.SRIOVSpec{}}},
		{name: "no sriov block: no condition", o: Observed{}},
		{name: "enabled without a credential", o: Observed{Spec: &capvcov1.SRIOVSpec{Enabled: true}}, reason: ReasonCredentialMissing, says: "scoped"},
		{name: "the cluster's own Secret", o: Observed{Spec: &capvcov1.SRIOVSpec{Enabled: true, CredentialSecretRef: &corev1.LocalObjectReference{Name: "cluster-cred"}}, ClusterCredential: cluster},
			reason: ReasonClusterCredentialRefused, says: "customer-wide"},
		{name: "a copy of the cluster's credential", o: Observed{Spec: enabled, ClusterCredential: cluster, Credential: secret("sriov-cred", "url", "https://vco.example/api/1", "customer", "acme", "jwt", "cluster-token")},
			reason: ReasonClusterCredentialRefused, says: "same credential"},
		{name: "Secret not found", o: Observed{Spec: enabled, ClusterCredential: cluster}, reason: ReasonCredentialNotFound, says: "does not exist"},
		{name: "Secret unreadable", o: Observed{Spec: enabled, CredentialErr: errors.New("forbidden")}, reason: ReasonCredentialUnreadable, says: "forbidden"},
		{name: "Secret without a token", o: Observed{Spec: enabled, Credential: secret("sriov-cred", "url", "https://vco.example/api/1", "customer", "acme")},
			reason: ReasonCredentialInvalid, says: "jwt"},
		{name: "agent not installed", o: Observed{Spec: enabled, ClusterCredential: cluster, Credential: good}, reason: ReasonAgentNotDelivered, says: Namespace},
		{name: "agent not deliverable", o: Observed{Spec: enabled, Credential: good, AgentErr: errors.New("apply DaemonSet: forbidden")},
			reason: ReasonAgentNotDelivered, says: "could not be installed in the workload cluster (namespace whitesky-sriov-cni): apply DaemonSet: forbidden"},
		{name: "no workers", o: Observed{Spec: enabled, Credential: good, Agent: ds(1, appsv1.DaemonSetStatus{ObservedGeneration: 1})}, reason: ReasonNoNodes, says: "no worker"},
		{name: "not observed by its controller", o: Observed{Spec: enabled, Credential: good, Agent: ds(2, appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, NumberReady: 3, NumberAvailable: 3, UpdatedNumberScheduled: 3})},
			reason: ReasonAgentNotReady, says: "not rolled out"},
		{name: "some agents not available", o: Observed{Spec: enabled, Credential: good, Agent: ds(1, appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, NumberReady: 3, NumberAvailable: 1, UpdatedNumberScheduled: 3})},
			reason: ReasonAgentNotReady, says: "1 of 3"},
		{name: "old agents still running", o: Observed{Spec: enabled, Credential: good, Agent: ds(1, appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, NumberReady: 3, NumberAvailable: 3, UpdatedNumberScheduled: 2})},
			reason: ReasonAgentNotReady, says: "2 updated"},
		{name: "ready", o: Observed{Spec: enabled, ClusterCredential: cluster, Credential: good, Agent: ready}, reason: ReasonReady, status: metav1.ConditionTrue, says: "all 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Ready(tc.o)
			if tc.reason == "" {
				if got != nil {
					t.Fatalf("got %+v, want no condition", got)
				}
				return
			}
			want := tc.status
			if want == "" {
				want = metav1.ConditionFalse
			}
			if got == nil || got.Reason != tc.reason || got.Status != want || !strings.Contains(got.Message, tc.says) {
				t.Fatalf("got %+v, want %s %s saying %q", got, want, tc.reason, tc.says)
			}
			if strings.Contains(got.Message, "token") && !strings.Contains(tc.says, "token") {
				t.Errorf("the message shows a credential: %s", got.Message)
			}
		})
	}
}
