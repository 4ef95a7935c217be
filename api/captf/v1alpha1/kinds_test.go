package v1alpha1_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// The registry says what the CRDs say: each kind's singular and short name are the ones
// kubectl resolves, so the names the plugin accepts and prints are the API server's.
func TestKindsAgreeWithTheirCRDs(t *testing.T) {
	for _, k := range captfv1.Kinds {
		path := filepath.Join("..", "..", "..", "config", "crd", "bases",
			"infrastructure.cluster.x-k8s.io_"+k.Resource+"s.yaml")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		n := crd.Spec.Names
		if n.Kind != k.Kind || n.Singular != k.Resource || n.Plural != k.Resource+"s" || !slices.Equal(n.ShortNames, []string{k.ShortName}) {
			t.Errorf("%s: the registry says %s %s/%s/%s, the CRD %s %s/%s/%v", path, k.Kind, k.Resource, k.Resource+"s", k.ShortName,
				n.Kind, n.Singular, n.Plural, n.ShortNames)
		}
	}
}

func TestKindsMakeTheirObjects(t *testing.T) {
	shorts := map[string]bool{}
	for _, k := range captfv1.Kinds {
		obj := k.New()
		if obj.WorkspaceKind() != k.Kind {
			t.Errorf("%s.New() makes a %s", k.Kind, obj.WorkspaceKind())
		}
		if got, ok := captfv1.KindOf(obj); !ok || got.Kind != k.Kind {
			t.Errorf("KindOf(%T) = %v, %v", obj, got.Kind, ok)
		}
		if got, ok := captfv1.LookupShort(k.Short); !ok || got.Kind != k.Kind {
			t.Errorf("LookupShort(%q) = %v, %v", k.Short, got.Kind, ok)
		}
		if shorts[k.Short] {
			t.Errorf("two kinds abbreviate to %q", k.Short)
		}
		shorts[k.Short] = true
		// A list's items point into the list: what a caller changes through them is the list's.
		list := k.NewList()
		items := list.WorkspaceItems()
		if len(items) != 0 {
			t.Fatalf("%s: an empty list has %d items", k.Kind, len(items))
		}
		spec, status := obj.Workspace()
		if spec == nil || status == nil {
			t.Errorf("%s: Workspace() = %v, %v", k.Kind, spec, status)
		}
		if !strings.HasPrefix(strings.ToLower(k.Kind), "terraform") || !slices.Contains(k.Aliases(), k.ShortName) {
			t.Errorf("%s: aliases %v", k.Kind, k.Aliases())
		}
	}
	if _, ok := captfv1.KindOf(&captfv1.TerraformPlan{}); ok {
		t.Error("a TerraformPlan is not a workspace kind")
	}
	if _, ok := captfv1.LookupKind("TerraformPlan"); ok {
		t.Error("LookupKind knows TerraformPlan")
	}
}

func TestWorkspaceItemsPointIntoTheList(t *testing.T) {
	list := &captfv1.TerraformMachineList{Items: []captfv1.TerraformMachine{{}, {}}}
	items := list.WorkspaceItems()
	if len(items) != 2 {
		t.Fatalf("%d items", len(items))
	}
	items[1].SetName("m-1")
	if list.Items[1].Name != "m-1" {
		t.Errorf("a change through the item did not reach the list: %q", list.Items[1].Name)
	}
	_, status := items[0].Workspace()
	status.AppliedInputsHash = "h"
	if list.Items[0].Status.AppliedInputsHash != "h" {
		t.Error("Workspace() of an item does not point into the list")
	}
}
