package move

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/capx-io/capx/internal/scheme"
)

// A target without the provider is told the command that registers it there.
func TestCheckInventoryNamesTheTargetsFix(t *testing.T) {
	src := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(Capx.InventoryObject("v0.1.0")).Build()
	dst := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	checks := CheckInventory(context.Background(), src, dst, Capx, "kubectl captf move register-inventory",
		"kubectl captf move register-inventory --kubeconfig target.kubeconfig")
	if len(checks) != 2 || !checks[0].Passed || checks[1].Passed ||
		!strings.Contains(checks[1].Message, "or run kubectl captf move register-inventory --kubeconfig target.kubeconfig)") {
		t.Fatalf("%+v", checks)
	}
}
