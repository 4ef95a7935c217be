package controllers_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// TestCredentialsNeverShown: a missing or broken credential Secret is a clear condition naming
// the Secret and its keys; the token and secret values appear in no log line, event or status,
// across a whole bring-up and teardown.
func TestCredentialsNeverShown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	g := NewWithT(t)
	ctx := context.Background()
	const clientSecret = "cs-VERY-SECRET-0451"
	h.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "broken"},
		Data: map[string][]byte{vco.SecretKeyURL: []byte(h.sim.APIURL()), vco.SecretKeyCustomer: []byte(vcosim.SeedCustomer),
			vco.SecretKeyClientID: []byte("capvco"), vco.SecretKeyClientSecret: []byte(clientSecret)},
	})
	_, missing := h.cluster("missing", func(vc *capvcov1.VCOCluster) { vc.Spec.CredentialsRef.Name = "nothing-here" })
	_, broken := h.cluster("broken", func(vc *capvcov1.VCOCluster) { vc.Spec.CredentialsRef.Name = "broken" })
	cluster, ok := h.cluster("ok", nil)

	waitFor(h, missing, 30*time.Second, "CredentialsNotFound", func(vc *capvcov1.VCOCluster) bool {
		c := conditions.Get(vc, capvcov1.CredentialsReadyCondition)
		return c != nil && c.Reason == capvcov1.CredentialsNotFoundReason && strings.Contains(c.Message, "nothing-here")
	})
	waitFor(h, broken, 30*time.Second, "CredentialsInvalid naming iamURL", func(vc *capvcov1.VCOCluster) bool {
		c := conditions.Get(vc, capvcov1.CredentialsReadyCondition)
		return c != nil && c.Reason == capvcov1.CredentialsInvalidReason && strings.Contains(c.Message, vco.SecretKeyIAMURL)
	})
	g.Expect(conditions.IsFalse(broken, capvcov1.ReadyCondition)).To(BeTrue())
	g.Expect(broken.Status.Initialization.Provisioned).To(BeNil())

	waitFor(h, ok, time.Minute, "provisioned", provisionedCluster)
	m := h.machine("ok", "cp-0", true, nil)
	waitFor(h, m, time.Minute, "provisioned", provisionedMachine)
	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	h.waitGone(ok, time.Minute)

	var events corev1.EventList
	g.Expect(env.Client.List(ctx, &events, client.InNamespace(h.ns))).To(Succeed())
	shown, _ := json.Marshal([]any{events.Items, missing.Status, broken.Status, m.Status})
	everything := string(shown) + h.logs.String()
	g.Expect(h.logs.String()).NotTo(BeEmpty(), "the controllers logged")
	for _, secret := range []string{h.simToken, clientSecret} {
		g.Expect(strings.Contains(everything, secret)).To(BeFalse(), "a credential value was shown")
	}
}

// TestTemplatePublishesScaleFromZeroCapacity: a GPU VCOMachineTemplate asking for a vendor
// publishes the cluster-autoscaler capacity annotations; a pinned profile or an unsupported
// vendor leaves the GPU out and says why.
func TestTemplatePublishesScaleFromZeroCapacity(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	tmpl := func(name string, gpu *capvcov1.GPUSpec) *capvcov1.VCOMachineTemplate {
		img := int64(1)
		t := &capvcov1.VCOMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
		t.Spec.Template.Spec = capvcov1.VCOMachineSpec{Image: capvcov1.ImageSpec{ID: &img}, VCPUs: 8, MemoryMiB: 65536, BootDiskGiB: 50, GPU: gpu}
		h.create(t)
		return t
	}
	for _, tc := range []struct {
		t       *capvcov1.VCOMachineTemplate
		reason  string
		gpuType string
		count   string
	}{
		{tmpl("nvidia", &capvcov1.GPUSpec{Vendor: "nvidia", Count: 2}), capvcov1.CapacityPublishedReason, "nvidia.com/gpu", "2"},
		{tmpl("pinned", &capvcov1.GPUSpec{ProfileID: vcosim.SeedGPUProfile}), capvcov1.GPUProfilePinnedReason, "", ""},
		{tmpl("amd", &capvcov1.GPUSpec{Vendor: "amd"}), capvcov1.GPUVendorUnsupportedReason, "", ""},
		{tmpl("cpu", nil), capvcov1.CapacityPublishedReason, "", ""},
	} {
		waitFor(h, tc.t, 30*time.Second, tc.reason, func(o *capvcov1.VCOMachineTemplate) bool {
			c := conditions.Get(o, capvcov1.CapacityPublishedCondition)
			// CAPI's patch helper writes conditions, then metadata, then the rest of status.
			return c != nil && c.Reason == tc.reason && o.Annotations[decide.CapacityCPU] != "" && len(o.Status.Capacity) > 0
		})
		a := tc.t.Annotations
		NewWithT(t).Expect([]string{a[decide.CapacityCPU], a[decide.CapacityMemory], a[decide.CapacityGPUType], a[decide.CapacityGPU]}).
			To(Equal([]string{"8", "64Gi", tc.gpuType, tc.count}), tc.t.Name)
		// status.capacity and nodeInfo, in the shape the autoscaler's clusterapi provider reads
		// from the infrastructure template (resource names to quantities, read through the
		// unstructured object as it does).
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(capvcov1.GroupVersion.WithKind("VCOMachineTemplate"))
		NewWithT(t).Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(tc.t), u)).To(Succeed())
		capacity, _, _ := unstructured.NestedStringMap(u.Object, "status", "capacity")
		want := map[string]string{"cpu": "8", "memory": "64Gi", "ephemeral-storage": "50Gi"}
		if tc.count != "" {
			want[tc.gpuType] = tc.count
		}
		NewWithT(t).Expect(capacity).To(Equal(want), tc.t.Name)
		arch, _, _ := unstructured.NestedString(u.Object, "status", "nodeInfo", "architecture")
		osName, _, _ := unstructured.NestedString(u.Object, "status", "nodeInfo", "operatingSystem")
		NewWithT(t).Expect([]string{arch, osName}).To(Equal([]string{"amd64", "linux"}), tc.t.Name)
	}
}
