package controllers_test

import (
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/version"
)

// TestAddonsDelivered: a provisioned VCOCluster waits for the kubeconfig Secret Cluster API
// writes, then installs the cloud controller manager into the workload cluster (here the envtest
// API server itself) and reports it: applied at the manager's version, not available while its
// Deployment has no replicas, and the CSI driver not installed, with why (spec.encryption set
// without spec.addons.csi is not acted on). AddonsReady never holds Ready back.
func TestAddonsDelivered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	_, vc := h.cluster("addons", func(vc *capvcov1.VCOCluster) {
		vc.Spec.Encryption = &capvcov1.EncryptionSpec{VaultMode: "none"}
	})
	waitFor(h, vc, time.Minute, "provisioned", provisionedCluster)
	waitFor(h, vc, time.Minute, "AddonsReady waiting for the control plane", func(vc *capvcov1.VCOCluster) bool {
		c := conditions.Get(vc, capvcov1.AddonsReadyCondition)
		return c != nil && c.Status == metav1.ConditionUnknown && c.Reason == capvcov1.WaitingForControlPlaneReason &&
			strings.Contains(c.Message, "addons-kubeconfig")
	})
	NewWithT(t).Expect(conditions.IsTrue(vc, capvcov1.ReadyCondition)).To(BeTrue(), "add-ons are not part of Ready")

	kubeconfig, err := os.ReadFile(env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	h.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "addons-kubeconfig"}, Data: map[string][]byte{"value": kubeconfig}})
	v := version.Get().Version
	waitFor(h, vc, time.Minute, "the CCM applied and reported", func(vc *capvcov1.VCOCluster) bool {
		c := conditions.Get(vc, capvcov1.AddonsReadyCondition)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == capvcov1.AddonsNotAvailableReason &&
			strings.Contains(c.Message, "cloud-controller-manager "+v+" applied, waiting for Deployment kube-system/capvco-cloud-controller-manager") &&
			strings.Contains(c.Message, "csi-driver not installed (spec.addons.csi is not set: spec.encryption is not acted on") &&
			len(vc.Status.Addons) == 1 && vc.Status.Addons[0].Name == "cloud-controller-manager" && vc.Status.Addons[0].Version == v &&
			!vc.Status.Addons[0].Available
	})
	NewWithT(t).Expect(conditions.IsTrue(vc, capvcov1.ReadyCondition)).To(BeTrue(), "add-ons are not part of Ready")
	sec := &corev1.Secret{}
	sec.Namespace, sec.Name = "kube-system", "capvco-cloud-controller-manager-credentials"
	NewWithT(t).Expect(h.get(sec)).To(Succeed())
	NewWithT(t).Expect(string(sec.Data["jwt"])).To(Equal(h.simToken))
}
