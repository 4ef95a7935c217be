package controllers

import (
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/state"
)

func TestSecretIndexKeys(t *testing.T) {
	got := secretIndexKeys(map[string]string{
		contract.BackendStateLabel: "true", contract.BackendSuffixLabel: "ns-machine-a",
		captfv1.StateBackupSuffixLabel: "ns-machine-b", captfv1.ManagedLabel: "true",
	})
	want := []string{contract.BackendSuffixLabel + "=ns-machine-a", captfv1.StateBackupSuffixLabel + "=ns-machine-b"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := secretIndexKeys(map[string]string{captfv1.ManagedLabel: "true"}); got != nil {
		t.Fatalf("a Secret without indexed labels has keys %q", got)
	}
}

// TestIndexedSecretList: the lists every reconcile makes (its state, its backups) read the
// index; others keep their options, and the label selector always stays.
func TestIndexedSecretList(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []client.ListOption
		want string // the field selector added, "" for none
	}{
		{"state", []client.ListOption{client.InNamespace("ns"), state.Selector("s")}, secretLabelIndex + "=" + contract.BackendSuffixLabel + "=s"},
		{"backups", []client.ListOption{client.InNamespace("ns"), state.BackupSelector("s")}, secretLabelIndex + "=" + captfv1.StateBackupSuffixLabel + "=s"},
		{"no indexed label", []client.ListOption{client.InNamespace("ns"), client.MatchingLabels{captfv1.ManagedLabel: "true"}}, ""},
		{"no selector", []client.ListOption{client.InNamespace("ns")}, ""},
		{"already by field", []client.ListOption{state.Selector("s"), client.MatchingFields{"x": "y"}}, "x=y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lo client.ListOptions
			lo.ApplyOptions(indexedSecretList(tc.opts))
			got := ""
			if lo.FieldSelector != nil {
				for _, r := range lo.FieldSelector.Requirements() {
					got = r.Field + "=" + r.Value
				}
			}
			if got != tc.want {
				t.Fatalf("field selector %q, want %q", got, tc.want)
			}
			var before client.ListOptions
			before.ApplyOptions(tc.opts)
			if before.LabelSelector != nil && lo.LabelSelector.String() != before.LabelSelector.String() {
				t.Fatalf("label selector %q became %q", before.LabelSelector, lo.LabelSelector)
			}
		})
	}
}
