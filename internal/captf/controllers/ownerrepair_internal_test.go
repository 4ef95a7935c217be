package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/scheme"
)

// TestRepairPlanKey: the plan key gets the live object as its controller when it names an
// earlier object of the same kind and name, or no owner; other owners stay; a key controlled by
// something else, or already right, is not written.
func TestRepairPlanKey(t *testing.T) {
	owner := jobs.Owner{Kind: "TerraformCluster", Namespace: "ns", Name: "c", UID: "live"}
	want := owner.ControllerRef()
	want.BlockOwnerDeletion = nil
	earlier := want
	earlier.UID = "earlier"
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "cm"}
	foreign := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Vault", Name: "v", UID: "vault", Controller: ptr.To(true)}
	for name, tc := range map[string]struct {
		have, want []metav1.OwnerReference
	}{
		"an earlier UID":               {have: []metav1.OwnerReference{earlier}, want: []metav1.OwnerReference{want}},
		"no owner":                     {have: nil, want: []metav1.OwnerReference{want}},
		"other owners stay":            {have: []metav1.OwnerReference{other, earlier}, want: []metav1.OwnerReference{other, want}},
		"already right":                {have: []metav1.OwnerReference{want}, want: []metav1.OwnerReference{want}},
		"another controller's key":     {have: []metav1.OwnerReference{foreign}, want: []metav1.OwnerReference{foreign}},
		"the manager's older form too": {have: []metav1.OwnerReference{owner.ControllerRef()}, want: []metav1.OwnerReference{want}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: planKeyName(owner), OwnerReferences: tc.have, ResourceVersion: "7"}}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(key).Build()
			r := &provider[*captfv1.TerraformCluster]{engine: &engine{client: c}, kind: clusterKind{}}
			p := &pass[*captfv1.TerraformCluster]{owner: owner,
				scope: &reconcileScope[*captfv1.TerraformCluster]{Object: &captfv1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{UID: types.UID("live")}}}}
			g.Expect(r.repairPlanKey(context.Background(), p)).To(Succeed())
			got := &corev1.Secret{}
			g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(key), got)).To(Succeed())
			g.Expect(got.OwnerReferences).To(Equal(tc.want))
			if equalRefs(tc.have, tc.want) {
				g.Expect(got.ResourceVersion).To(Equal("7"), "nothing written")
			}
		})
	}
	// No plan key: nothing to repair.
	r := &provider[*captfv1.TerraformCluster]{engine: &engine{client: fake.NewClientBuilder().WithScheme(scheme.New()).Build()}, kind: clusterKind{}}
	NewWithT(t).Expect(r.repairPlanKey(context.Background(), &pass[*captfv1.TerraformCluster]{owner: owner})).To(Succeed())
}

func equalRefs(a, b []metav1.OwnerReference) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].UID != b[i].UID || !ptr.Equal(a[i].Controller, b[i].Controller) || !ptr.Equal(a[i].BlockOwnerDeletion, b[i].BlockOwnerDeletion) {
			return false
		}
	}
	return true
}
