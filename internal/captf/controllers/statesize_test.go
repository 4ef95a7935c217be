package controllers_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// TestStateTooLargeHolds: a cluster module whose state outgrows the 1 MiB a state Secret holds.
// The apply creates its resources but cannot save the state, and neither can the runner's push:
// the object holds with StateTooLarge (not a retried ApplyFailed), the message names the command
// that resumes, no second apply starts (it would create every resource again), and the command
// as printed resumes runs.
func TestStateTooLargeHolds(t *testing.T) {
	g := NewWithT(t)
	ns, kubelet := scenario(t)
	tc := newTerraformCluster(t, ns, "big", func(tc *captfv1.TerraformCluster) {
		tc.Spec.Variables = vars(map[string]any{"bulk_resources": 24})
	})
	waitFor(t, tc, 2*time.Minute, "held on the unsaved state, the run recorded", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.StateTooLargeReason) &&
			o.Status.LastRun != nil
	})
	msg := conditions.GetMessage(tc, captfv1.ApplyJobSucceededCondition)
	g.Expect(msg).To(ContainSubstring("could not save its state"))
	g.Expect(msg).To(ContainSubstring("at most 1 MiB"))
	jobs := jobsOf(t, ns, "TerraformCluster", "big")
	g.Expect(jobs).To(HaveLen(1))
	first := jobs[0].Name
	g.Expect(msg).To(ContainSubstring("`kubectl annotate terraformcluster big -n " + ns + " captf.io/state-recovered=" + first + " --overwrite`"))
	g.Expect(tc.Status.LastRun).NotTo(BeNil())
	g.Expect(tc.Status.LastRun.Error.Kind).To(Equal("state-not-persisted"))
	g.Expect(jobs[0].Annotations).To(HaveKey(captfv1.StateNotPersistedAnnotation))
	// The unsaved state is kept as a backup of the object, which status lists.
	g.Expect(msg).To(MatchRegexp("A copy is kept as state backup captf-state-backup-[0-9a-f]{16}-c-[0-9]+ \\(`kubectl captf backups list big -n " + ns + "`\\)"))
	waitFor(t, tc, 30*time.Second, "the kept state in status.stateBackups", func(o *captfv1.TerraformCluster) bool {
		return len(o.Status.StateBackups) > 0
	})
	waitFor(t, tc, 30*time.Second, "StateNearSecretLimit reports the unsaved state", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.StateNearSecretLimitCondition, metav1.ConditionTrue, captfv1.StateNearSecretLimitReason)
	})
	g.Expect(conditions.GetMessage(tc, captfv1.StateNearSecretLimitCondition)).To(HavePrefix("The state Job " + first + " could not save is 1.5"))
	// The kept state comes out as docs/captf/state.md says.
	set := regexp.MustCompile("captf-state-backup-[0-9a-f]{16}-c-[0-9]+").FindString(msg)
	dir := t.TempDir()
	extract := exec.Command("bash", "-euo", "pipefail", "-c", `set=`+set+`
n=$(kubectl get secret -n `+ns+` "$set" -o jsonpath='{.metadata.annotations.captf\.io/state-backup-chunks}')
for i in $(seq 0 $((n - 1))); do
  s=$set; [ "$i" -gt 0 ] && s=$set-part-$i
  kubectl get secret -n `+ns+` "$s" -o jsonpath='{.data.tfstate}' | base64 -d
done | gunzip > errored.tfstate`)
	extract.Dir = dir
	extract.Env = append(os.Environ(), "KUBECONFIG="+env.KubeconfigPath, "PATH="+filepath.Join(env.Root, "bin")+":"+os.Getenv("PATH"))
	out, err := extract.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	raw, err := os.ReadFile(filepath.Join(dir, "errored.tfstate"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(raw)).To(BeNumerically(">", 3<<20), "the whole state, 24 bulk resources")
	g.Expect(string(raw)).To(ContainSubstring(`"type": "terraform_data"`))

	pods := kubelet.Started()
	// The retry backoff after a failure starts at a minute; the hold has no end at all. A
	// changed input would be applied at once without it.
	update(t, tc, func(o *captfv1.TerraformCluster) {
		o.Spec.Variables = vars(map[string]any{"bulk_resources": 24, "bulk_hashes": 513})
	})
	never(t, 5*time.Second, "another Job started after the unsaved state", func() bool {
		return kubelet.Started() > pods || len(jobsOf(t, ns, "TerraformCluster", "big")) > 1
	})

	// The hold moves with the object: with the Job gone (Jobs do not move with clusterctl move,
	// or someone deletes it), its copy on the object still holds every run.
	waitFor(t, tc, 30*time.Second, "the hold copied onto the object", func(o *captfv1.TerraformCluster) bool {
		return strings.Contains(o.Annotations[captfv1.StateNotPersistedHoldAnnotation], `"job":"`+first+`"`)
	})
	held := jobs[0]
	g.Expect(env.Client.Delete(context.Background(), &held, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	gone(t, &held, time.Minute)
	update(t, tc, func(o *captfv1.TerraformCluster) {
		o.Spec.Variables = vars(map[string]any{"bulk_resources": 24, "bulk_hashes": 514})
	})
	never(t, 5*time.Second, "a Job started once the held Job was gone", func() bool {
		return kubelet.Started() > pods || len(jobsOf(t, ns, "TerraformCluster", "big")) > 0
	})
	waitFor(t, tc, 30*time.Second, "still held, from the object's copy", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionFalse, captfv1.StateTooLargeReason) &&
			strings.Contains(conditions.GetMessage(o, captfv1.ApplyJobSucceededCondition), "Job "+first)
	})

	// The operator's answer, as the message prints it: runs start again (this one applies the
	// changed inputs, and fails the same way).
	command := regexp.MustCompile("`(kubectl annotate [^`]+)`").FindStringSubmatch(msg)
	g.Expect(command).To(HaveLen(2), msg)
	run := exec.Command(filepath.Join(env.Root, "bin", "kubectl"), strings.Fields(command[1])[1:]...)
	run.Env = append(os.Environ(), "KUBECONFIG="+env.KubeconfigPath)
	out, err = run.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Eventually(func() int { return len(jobsOf(t, ns, "TerraformCluster", "big")) }, time.Minute, 200*time.Millisecond).Should(Equal(1))
	g.Expect(jobsOf(t, ns, "TerraformCluster", "big")[0].Name).NotTo(Equal(first))
}

// TestStateNearSecretLimit: a cluster whose state takes most of a Secret applies, and warns
// before the next growth fails: status.stateBytes, StateNearSecretLimit=True and the manager's
// captf_state_bytes, whose series goes with the object.
func TestStateNearSecretLimit(t *testing.T) {
	g := NewWithT(t)
	ns, _ := scenario(t)
	tc := newTerraformCluster(t, ns, "near", func(tc *captfv1.TerraformCluster) {
		tc.Spec.Variables = vars(map[string]any{"bulk_resources": 13})
	})
	// The status fields land in a patch of their own after the conditions' (CAPI's patch helper
	// writes conditions first): both are waited for.
	waitFor(t, tc, 2*time.Minute, "applied and warned", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.ApplyJobSucceededCondition, metav1.ConditionTrue, captfv1.ApplySucceededReason) &&
			hasCondition(o, captfv1.StateNearSecretLimitCondition, metav1.ConditionTrue, captfv1.StateNearSecretLimitReason) &&
			o.Status.StateBytes != nil
	})
	g.Expect(*tc.Status.StateBytes).To(BeNumerically(">=", 3<<18), "75% of 1 MiB")
	g.Expect(*tc.Status.StateBytes).To(BeNumerically("<", 1<<20))
	g.Expect(conditions.GetMessage(tc, captfv1.StateNearSecretLimitCondition)).To(ContainSubstring("of the 1 MiB one state Secret holds"))
	g.Eventually(func() float64 { return stateBytesSample(t, ns, "near") }).Should(BeNumerically("==", *tc.Status.StateBytes))

	g.Expect(env.Client.Delete(context.Background(), tc)).To(Succeed())
	gone(t, tc, 2*time.Minute)
	g.Eventually(func() float64 { return stateBytesSample(t, ns, "near") }).Should(BeNumerically("==", -1))
}

// stateBytesSample reads captf_state_bytes of a TerraformCluster from the manager's registry
// (the test runs the manager in-process); -1 when there is no such series.
func stateBytesSample(t *testing.T, ns, name string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "captf_state_bytes" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["namespace"] == ns && l["kind"] == "TerraformCluster" && l["name"] == name {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
