package controllers_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/sriov"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// TestSRIOVAgentReady: with spec.sriov.enabled, SRIOVAgentReady is False while the workload
// cluster cannot be reached (AgentNotDelivered), False while the delivered DaemonSet has not
// rolled out (AgentNotReady), and True only once the DaemonSet reports the agent available on
// every scheduled node; a credential Secret holding the cluster's own token is refused
// (ClusterCredentialRefused) and not copied. SRIOVAgentReady never holds Ready back.
//
// Not parallel: its workload cluster is the envtest API server, and its CCM delivery writes the
// same kube-system objects as TestAddonsDelivered's.
func TestSRIOVAgentReady(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "sriov-credentials"}, Data: map[string][]byte{
		"url": []byte(h.sim.APIURL()), "customer": []byte(vcosim.SeedCustomer), "jwt": []byte(h.simToken)}})
	_, vc := h.cluster("sriov", func(vc *capvcov1.VCOCluster) {
		vc.Spec.SRIOV = &capvcov1.SRIOVSpec{Enabled: true, CredentialSecretRef: &corev1.LocalObjectReference{Name: "sriov-credentials"}}
	})
	reason := func(r string, says string) func(*capvcov1.VCOCluster) bool {
		return func(vc *capvcov1.VCOCluster) bool {
			c := conditions.Get(vc, capvcov1.SRIOVAgentReadyCondition)
			return c != nil && c.Reason == r && strings.Contains(c.Message, says)
		}
	}
	waitFor(h, vc, time.Minute, "a copy of the cluster's credential refused", reason(sriov.ReasonClusterCredentialRefused, "same credential"))
	NewWithT(t).Expect(conditions.IsTrue(vc, capvcov1.ReadyCondition)).To(BeTrue(), "SRIOVAgentReady is not part of Ready")

	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "sriov-credentials"}}
	NewWithT(t).Expect(h.get(sec)).To(Succeed())
	sec.Data["jwt"] = []byte("a-token-of-its-own")
	NewWithT(t).Expect(env.Client.Update(context.Background(), sec)).To(Succeed())
	waitFor(h, vc, time.Minute, "not delivered before the kubeconfig", reason(sriov.ReasonAgentNotDelivered, "not installed in the workload cluster yet"))

	kubeconfig, err := os.ReadFile(env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	h.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "sriov-kubeconfig"}, Data: map[string][]byte{"value": kubeconfig}})
	waitFor(h, vc, time.Minute, "delivered, not rolled out", reason(sriov.ReasonAgentNotReady, "not rolled out"))

	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: sriov.Namespace, Name: "capvco-sriov-agent"}}
	NewWithT(t).Expect(h.get(ds)).To(Succeed())
	ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: 2, CurrentNumberScheduled: 2,
		NumberReady: 2, NumberAvailable: 1, UpdatedNumberScheduled: 2}
	NewWithT(t).Expect(env.Client.Status().Update(context.Background(), ds)).To(Succeed())
	waitFor(h, vc, time.Minute, "available on 1 of 2", reason(sriov.ReasonAgentNotReady, "available on 1 of 2"))
	ds.Status.NumberAvailable = 2
	NewWithT(t).Expect(env.Client.Status().Update(context.Background(), ds)).To(Succeed())
	waitFor(h, vc, time.Minute, "ready", func(vc *capvcov1.VCOCluster) bool {
		c := conditions.Get(vc, capvcov1.SRIOVAgentReadyCondition)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == sriov.ReasonReady && strings.Contains(c.Message, "all 2 nodes")
	})
}
