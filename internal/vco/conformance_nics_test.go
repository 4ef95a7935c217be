package vco_test

import (
	"errors"
	"testing"

	"github.com/capx-io/capx/internal/vco"
)

// nicScenario attaches, reads and detaches an external NIC, as the SR-IOV agent does.
func nicScenario(t *testing.T, e *env, cloudspaceID string, vmID int) {
	t.Helper()
	ctx, c := e.ctx, e.cluster
	nets, err := c.ListExternalNetworks(ctx, loc)
	if err != nil || len(nets) == 0 {
		t.Fatalf("external networks: %v %v", nets, err)
	}
	net := nets[len(nets)-1].ID
	if err := c.AttachExternalNIC(ctx, cloudspaceID, vmID, vco.AttachExternalNICRequest{NetworkID: net, Model: "virtio"}); err != nil {
		t.Fatal(err)
	}
	nics, err := c.ListExternalNICs(ctx, cloudspaceID, vmID)
	if err != nil || len(nics) != 1 || nics[0].MAC == "" || nics[0].IP == "" || nics[0].NetworkID != net {
		t.Fatalf("NICs = %+v %v", nics, err)
	}
	got, err := c.GetExternalNIC(ctx, cloudspaceID, vmID, nics[0].IP)
	if err != nil || got.MAC != nics[0].MAC {
		t.Fatalf("NIC = %+v %v", got, err)
	}
	if err := c.DetachExternalNIC(ctx, cloudspaceID, vmID, net, nics[0].IP); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetExternalNIC(ctx, cloudspaceID, vmID, nics[0].IP); !errors.Is(err, vco.ErrNotFound) {
		t.Fatalf("a detached NIC is still there: %v", err)
	}
}
