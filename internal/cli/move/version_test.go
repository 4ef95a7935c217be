package move

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/scheme"
)

func managerDeployment(image string, labels map[string]string) *appsv1.Deployment {
	l := map[string]string{"app.kubernetes.io/name": "capx", "app.kubernetes.io/component": "manager"}
	for k, v := range labels {
		l[k] = v
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "capx-system", Name: "capx-controller-manager", Labels: l},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "manager", Image: image}}}}},
	}
}

func registerInventory(t *testing.T, objs []client.Object, args ...string) (cmdutil.ExitCode, string, string) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	streams, _, out, errOut := cmdutil.TestIOStreams(false)
	f := cmdutil.NewTestFactory(streams, "kubectl captf", nil, c, nil, "default")
	root := cmdutil.NewRoot(f, "", "")
	root.AddCommand(NewCmdRegisterInventory(f, Capx, nil))
	code := cmdutil.Execute(root, streams, append([]string{"register-inventory"}, args...))
	return code, out.String(), errOut.String()
}

// The quickstart: clusterctl init recorded v0.1.0, and the manager's image is tagged with its
// content. register-inventory --dry-run (step 1 of the move runbook) keeps the recorded
// version instead of refusing the tag.
func TestRegisterInventoryKeepsTheInventorysVersion(t *testing.T) {
	inventoryCRD := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: InventoryCRD},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha3", Served: true}}}}
	objs := []client.Object{inventoryCRD, Capx.InventoryObject("v0.1.0"), managerDeployment("capx.local/manager:3fa2b9c1d0e4", nil)}
	code, out, errOut := registerInventory(t, objs, "--dry-run")
	if code != cmdutil.ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"(dry run) version v0.1.0 (kept from the inventory's existing entry", `tagged "3fa2b9c1d0e4", which is no version`,
		"(dry run) unchanged Provider capx-system/infrastructure-capx  version v0.1.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// A release's manager is tagged with its version, which wins over the recorded one.
	objs[2] = managerDeployment("ghcr.io/capx-io/capx-manager:v0.2.0", nil)
	if code, out, errOut := registerInventory(t, objs, "--dry-run"); code != cmdutil.ExitOK || !strings.Contains(out, "update    Provider capx-system/infrastructure-capx  version v0.1.0 -> v0.2.0") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	// Neither a version nor an entry: exit 3, saying what to pass.
	objs = []client.Object{inventoryCRD, managerDeployment("capx.local/manager:3fa2b9c1d0e4", nil)}
	code, _, errOut = registerInventory(t, objs, "--dry-run")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut, "the inventory has no entry for the provider yet; pass --version") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestChooseVersion(t *testing.T) {
	m := func(v string) *cmdutil.ManagerVersion {
		return &cmdutil.ManagerVersion{Namespace: "capx-system", Deployment: "d", Image: "img:" + v, Version: v}
	}
	for _, tc := range []struct {
		name     string
		m        *cmdutil.ManagerVersion
		mErr     error
		existing string
		want     string
		err      string
	}{
		{"a release", m("v0.2.0"), nil, "v0.1.0", "v0.2.0", ""},
		{"a release, no inventory", m("v0.2.0"), nil, "", "v0.2.0", ""},
		{"a source build", m("3fa2b9c1d0e4"), nil, "v0.1.0", "v0.1.0", ""},
		{"no manager", nil, errors.New("no manager Deployment"), "v0.1.0", "v0.1.0", ""},
		{"an untagged image", m(""), nil, "v0.1.0", "v0.1.0", ""},
		{"nothing to go by", m("3fa2b9c1d0e4"), nil, "", "", "pass --version"},
		{"a bad entry", m("3fa2b9c1d0e4"), nil, "latest", "", `records "latest"`},
	} {
		got, _, err := ChooseVersion(tc.m, tc.mErr, tc.existing)
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %q %v", tc.name, got, err)
		}
	}
}
