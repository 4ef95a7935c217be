package addons_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/capvco/addons"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/vco"
)

// TestCCMReplicasFollowTheControlPlane: the CCM's Pods run one to a control-plane node, so a
// cluster whose Cluster API Cluster wants one control-plane machine gets one replica (a second
// would never be scheduled, and the add-on never available, as on the single control plane of
// test/localcluster/vcohost's TestManagerFormsARealCluster); one with more gets two, one
// Cluster API has not counted yet gets two, and a changed count is applied again.
func TestCCMReplicasFollowTheControlPlane(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vco-credentials"}, Data: map[string][]byte{
		vco.SecretKeyURL: []byte("https://vco.example.com/api/1"), vco.SecretKeyCustomer: []byte("acme"), vco.SecretKeyJWT: []byte("t")}})
	create(t, kubeconfigSecret(t, ns, "prod"))
	cluster := testenv.Cluster(ns, "prod", "VCOCluster", "prod")
	create(t, cluster)
	d := &addons.Delivery{Management: env.Client, Registry: addons.Registry{addons.CloudControllerManager{}},
		Manager: addons.Settings{Version: "v1.2.3", ImageRepository: "registry.example/capx"}}
	vc := vcoCluster(ns, "prod")
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	for i, step := range []struct {
		desired *int32
		want    int32
	}{{nil, 2}, {ptr.To[int32](1), 1}, {ptr.To[int32](3), 2}, {ptr.To[int32](1), 1}} {
		if step.desired != nil {
			cluster.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{DesiredReplicas: step.desired}
			if err := env.Client.Status().Update(ctx, cluster); err != nil {
				t.Fatal(err)
			}
		}
		obs := d.Reconcile(ctx, addons.Target{VCOCluster: vc, ClusterName: "prod"}, now.Add(time.Duration(i)*time.Minute))
		if o := obs.Addons[0]; o.Err != nil || !o.Applied {
			t.Fatalf("step %d (desired %v): %+v", i, step.desired, o)
		}
		vc.Status.Addons = addons.Records(&obs, vc.Status.Addons, now.Add(time.Duration(i)*time.Minute))
		dep := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "capvco-cloud-controller-manager"}, dep); err != nil {
			t.Fatal(err)
		}
		if got := ptr.Deref(dep.Spec.Replicas, 0); got != step.want {
			t.Errorf("step %d: %v control-plane machines wanted: %d replicas, want %d", i, ptr.Deref(step.desired, 0), got, step.want)
		}
	}
}
