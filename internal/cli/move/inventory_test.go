package move

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/capx-io/capx/internal/scheme"
)

func TestInventoryObjectAsClusterctlWritesIt(t *testing.T) {
	p := Capx.InventoryObject("v0.1.0")
	if p.Name != "infrastructure-capx" || p.Namespace != "capx-system" || p.ProviderName != "capx" ||
		p.Type != "InfrastructureProvider" || p.Version != "v0.1.0" || p.WatchedNamespace != "" ||
		p.APIVersion != "clusterctl.cluster.x-k8s.io/v1alpha3" || p.Kind != "Provider" {
		t.Fatalf("%+v", p)
	}
	want := map[string]string{"clusterctl.cluster.x-k8s.io": "", "cluster.x-k8s.io/provider": "infrastructure-capx", "clusterctl.cluster.x-k8s.io/core": "inventory"}
	if len(p.Labels) != len(want) {
		t.Fatalf("labels %v", p.Labels)
	}
	for k, v := range want {
		if p.Labels[k] != v {
			t.Fatalf("labels %v", p.Labels)
		}
	}
	// clusterctl derives the instance name from the same fields.
	if p.ManifestLabel() != p.Name || p.GetProviderType() != clusterctlv1.InfrastructureProviderType {
		t.Fatal(p.ManifestLabel())
	}
}

func TestValidateVersion(t *testing.T) {
	for v, ok := range map[string]bool{"v0.1.0": true, "1.2.3": true, "v1.2.3-rc.1": true, "dev": false, "": false, "v1.2": false} {
		if (ValidateVersion(v) == nil) != ok {
			t.Errorf("%q", v)
		}
	}
}

func TestRegisterInventoryIsIdempotent(t *testing.T) {
	ctx := context.Background()
	crd := func(name string, labels map[string]string) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha3", Served: true}}}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		crd(InventoryCRD, nil),
		crd("terraformclusters.infrastructure.cluster.x-k8s.io", map[string]string{"clusterctl.cluster.x-k8s.io": ""}),
	).Build()
	p := Capx
	p.CRDs = []string{"terraformclusters.infrastructure.cluster.x-k8s.io"}

	dry, err := RegisterInventory(ctx, c, p, "v0.1.0", true)
	if err != nil || len(dry) != 2 || dry[0].Action != "create" || dry[1].Action != "label" {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	var list clusterctlv1.ProviderList
	if err := c.List(ctx, &list); err != nil || len(list.Items) != 0 {
		t.Fatalf("dry run wrote: %v %v", list.Items, err)
	}

	if ch, err := RegisterInventory(ctx, c, p, "v0.1.0", false); err != nil || len(ch) != 2 {
		t.Fatalf("%+v %v", ch, err)
	}
	if ch, err := RegisterInventory(ctx, c, p, "v0.1.0", false); err != nil || len(ch) != 1 || ch[0].Action != "unchanged" {
		t.Fatalf("second run: %+v %v", ch, err)
	}
	if ch, err := RegisterInventory(ctx, c, p, "v0.2.0", false); err != nil || ch[0].Action != "update" {
		t.Fatalf("upgrade: %+v %v", ch, err)
	}
	got := &clusterctlv1.Provider{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "capx-system", Name: "infrastructure-capx"}, got); err != nil || got.Version != "v0.2.0" {
		t.Fatalf("%+v %v", got, err)
	}
	l := &apiextensionsv1.CustomResourceDefinition{}
	_ = c.Get(ctx, client.ObjectKey{Name: p.CRDs[0]}, l)
	if l.Labels["cluster.x-k8s.io/provider"] != "infrastructure-capx" {
		t.Fatalf("labels %v", l.Labels)
	}
	if _, err := RegisterInventory(ctx, c, p, "latest", false); err == nil {
		t.Fatal("accepted a version clusterctl cannot parse")
	}
}
