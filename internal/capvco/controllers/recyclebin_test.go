package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

// TestRecycledVMsDoNotBlockDeletion: VMs put in the recycle bin out of band (the platform's
// default delete) are still billed and cannot be stopped. A VCOMachine whose VM is there is
// deleted, and so is the cluster with another recycled VM in its cloudspace: both purge the VMs
// instead of retrying the refused stop forever. (Today's HEAD, 4d97e0c, never finished either.)
func TestRecycledVMsDoNotBlockDeletion(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	g := NewWithT(t)
	ctx := context.Background()
	cluster, vc := h.cluster("bin", nil)
	waitFor(h, vc, time.Minute, "provisioned", provisionedCluster)
	cp := h.machine("bin", "cp-0", true, nil)
	md := h.machine("bin", "md-0", false, nil)
	waitFor(h, cp, time.Minute, "provisioned", provisionedMachine)
	waitFor(h, md, time.Minute, "provisioned", provisionedMachine)

	api := vcotest.Client(t, h.sim, vcosim.SeedClusterPrinc)
	for _, m := range []int{int(*cp.Status.VMID), int(*md.Status.VMID)} {
		g.Expect(api.DeleteVM(ctx, cp.Status.CloudspaceID, m, vco.DeleteVMOptions{})).To(Succeed()) // to the recycle bin
	}

	g.Expect(env.Client.Delete(ctx, md)).To(Succeed())
	h.waitGone(md, time.Minute)
	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	h.waitGone(vc, 2*time.Minute)
	h.assertNothingLeft(nil)
}
