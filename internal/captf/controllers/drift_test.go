package controllers_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// setEndpointHost edits the endpoint host the state records for the cluster module's control
// plane (a string attribute: the edit must keep the recorded type, or the refresh fails).
func setEndpointHost(value string) func(map[string]any) {
	return func(st map[string]any) {
		for _, r := range st["resources"].([]any) {
			res := r.(map[string]any)
			if res["name"] != "control_plane" {
				continue
			}
			attrs := res["instances"].([]any)[0].(map[string]any)["attributes"].(map[string]any)
			for _, k := range []string{"input", "output"} {
				attrs[k].(map[string]any)["value"].(map[string]any)["endpoint"].(map[string]any)["host"] = value
			}
		}
	}
}

// TestDrift: with a short spec.drift interval drift Jobs run and find nothing; after an edit
// made outside OpenTofu they report it (DriftDetected=True/DriftReported, naming the count);
// with action Remediate the cluster re-applies and the next check finds no drift.
func TestDrift(t *testing.T) {
	g := NewWithT(t)
	ns, kubelet := scenario(t)
	const kind = captfv1.KindCluster
	every := func(action captfv1.DriftAction) func(*captfv1.TerraformCluster) {
		return func(o *captfv1.TerraformCluster) {
			o.Spec.Drift = &captfv1.DriftPolicy{IntervalSeconds: ptr.To[int32](1), Action: action}
		}
	}

	tc := newTerraformCluster(t, ns, "c1", every(captfv1.DriftActionReport))
	unblocked := watchBlockMove(t, tc, kind)
	waitFor(t, tc, 2*time.Minute, "a clean drift check", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization) &&
			hasCondition(o, captfv1.DriftDetectedCondition, metav1.ConditionFalse, captfv1.NoDriftReason)
	})

	// Stop the checks, so the edit cannot race a running Job (whose refresh would write the
	// state it read before the edit), and edit.
	update(t, tc, func(o *captfv1.TerraformCluster) { o.Spec.Drift = nil })
	waitFor(t, tc, time.Minute, "idle with the checks off", func(o *captfv1.TerraformCluster) bool {
		return o.Status.ObservedGeneration == o.Generation && o.Status.ActiveJob == nil && len(activeJobs(t, ns)) == 0
	})
	never(t, 2*time.Second, "a drift Job started after the checks were turned off", func() bool { return len(activeJobs(t, ns)) > 0 })
	editState(t, ns, kind, "c1", setEndpointHost("edited.out.of.band"))

	update(t, tc, every(captfv1.DriftActionReport))
	waitFor(t, tc, 2*time.Minute, "the drift reported", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.DriftDetectedCondition, metav1.ConditionTrue, captfv1.DriftReportedReason)
	})
	g.Expect(conditions.Get(tc, captfv1.DriftDetectedCondition).Message).To(ContainSubstring("found 1 drifted resources"))
	// Drift checks run back to back and history pruning soon deletes the apply Jobs: count the
	// applies that ran from the runner Pods' output instead.
	applies := func() int { return strings.Count(kubelet.Log.String(), "captf-runner: starting apply") }
	g.Expect(applies()).To(Equal(1))
	never(t, 3*time.Second, "Report re-applied", func() bool { return applies() > 1 })

	// Remediate re-applies; the next check is clean.
	update(t, tc, every(captfv1.DriftActionRemediate))
	waitFor(t, tc, 3*time.Minute, "the drift remediated", func(o *captfv1.TerraformCluster) bool {
		return applies() > 1 && hasCondition(o, captfv1.DriftDetectedCondition, metav1.ConditionFalse, captfv1.NoDriftReason)
	})
	g.Expect(applies()).To(Equal(2), "one remediation")
	cp := readState(t, ns, kind, "c1")
	g.Expect(cp.InputsHash).To(Equal(tc.Status.AppliedInputsHash))
	g.Expect(unblocked()).To(BeEmpty(), "back-to-back Jobs ran without block-move")
	update(t, tc, func(o *captfv1.TerraformCluster) { o.Spec.Drift = nil })
}
