package instances

import (
	"context"
	"errors"
	"testing"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/vco"
)

// emptyPlatform answers every VM read with 404 and every cloudspace read with success: a
// platform on which nothing runs.
type emptyPlatform struct{}

func (emptyPlatform) GetVM(context.Context, string, int) (vco.VM, error) {
	return vco.VM{}, vco.ErrNotFound
}
func (emptyPlatform) ListVMs(context.Context, string, bool) ([]vco.VM, error) {
	return nil, nil
}
func (emptyPlatform) GetCloudspace(context.Context, string) (vco.Cloudspace, error) {
	return vco.Cloudspace{}, nil
}

// FuzzByProviderID: a Node's spec.providerID is anyone's input. Only a provider ID CAPVCO's
// parser accepts, in a location the cluster has, may ever come back as "not found" (which
// deletes the Node).
func FuzzByProviderID(f *testing.F) {
	for _, s := range []string{"vco://l/1", "vco://l/01", "vco://other/2", "vco:///3", "vco://l/", "aws:///x", "", "vco://l/1/2", "vco://l/-1"} {
		f.Add(s)
	}
	sites := []Site{{Name: "primary", Location: "l", CloudspaceID: "cs"}}
	f.Fuzz(func(t *testing.T, pid string) {
		_, err := ByProviderID(context.Background(), emptyPlatform{}, sites, pid)
		if err == nil {
			t.Fatalf("%q: found a VM on an empty platform", pid)
		}
		if errors.Is(err, cloudprovider.InstanceNotFound) {
			loc, _, perr := names.ParseProviderID(pid)
			if perr != nil || loc != "l" {
				t.Fatalf("%q reported not found, but it is not a provider ID of this cluster", pid)
			}
		}
	})
}
