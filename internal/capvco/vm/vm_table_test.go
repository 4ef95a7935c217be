package vm_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/vm"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// TestRead: a recorded VM is read from its cloudspace's listing; one deleted out of band, in
// the recycle bin or destroyed is ErrLost (reported, never recreated); other failures are
// errors as they are.
func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, f *fixture, id int)
		lost  bool
		err   bool
	}{
		{name: "running", setup: func(*testing.T, *fixture, int) {}},
		{name: "in the recycle bin: lost", setup: func(t *testing.T, f *fixture, id int) {
			if err := f.api.DeleteVM(context.Background(), f.cs, id, vco.DeleteVMOptions{}); err != nil {
				t.Fatal(err)
			}
		}, lost: true},
		{name: "deleted permanently: lost", setup: func(t *testing.T, f *fixture, id int) {
			if err := f.api.DeleteVM(context.Background(), f.cs, id, vco.DeleteVMOptions{Permanently: true}); err != nil {
				t.Fatal(err)
			}
		}, lost: true},
		{name: "refused read: an error, not lost", setup: func(_ *testing.T, f *fixture, _ int) {
			f.sim.Faults().Add(vcosim.Fault{Route: "GET /customers/{customer_id}/cloudspaces/{cloudspace_id}/vms", Status: http.StatusForbidden})
		}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			id := f.vm(t, "m")
			tc.setup(t, f, id)
			v, err := vm.Read(context.Background(), f.api, &vm.Listings{}, f.cs, f.cs, id)
			switch {
			case tc.lost:
				if !errors.Is(err, vm.ErrLost) {
					t.Fatalf("err = %v, want ErrLost", err)
				}
			case tc.err:
				if err == nil || errors.Is(err, vm.ErrLost) {
					t.Fatalf("err = %v, want a plain error", err)
				}
			default:
				if err != nil || v.ID != id || !vm.Running(v) {
					t.Fatalf("vm %+v, %v", v, err)
				}
			}
		})
	}
}

// TestEnsure: one create per name, found again by name after an unknown outcome.
func TestEnsure(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   *vcosim.Fault
		existed bool
		creates int
	}{
		{name: "new", creates: 1},
		{name: "existing name: found, not created", existed: true},
		{name: "create applied but answered 502: found by name", creates: 1,
			fault: &vcosim.Fault{Route: "POST /customers/{customer_id}/cloudspaces/{cloudspace_id}/vms", Status: http.StatusBadGateway, Apply: true, Count: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.existed {
				f.vm(t, "m")
			}
			if tc.fault != nil {
				f.sim.Faults().Add(*tc.fault)
			}
			f.sim.ResetRequests()
			v, err := vm.Ensure(context.Background(), f.api, &vm.Listings{}, f.cs, f.cs, vco.CreateVMRequest{Name: "m", VCPUs: 1, MemoryMiB: 1024, ImageID: f.img})
			if err != nil && !strings.Contains(err.Error(), "502") {
				t.Fatal(err)
			}
			if err != nil { // a create of unknown outcome: the next reconcile finds it by name
				if v, err = vm.Ensure(context.Background(), f.api, &vm.Listings{}, f.cs, f.cs, vco.CreateVMRequest{Name: "m", VCPUs: 1, MemoryMiB: 1024, ImageID: f.img}); err != nil {
					t.Fatal(err)
				}
			}
			if v.Name != "m" || v.ID == 0 {
				t.Fatalf("vm %+v", v)
			}
			creates := 0
			for _, r := range f.sim.Requests() {
				if r.Method == http.MethodPost && strings.HasSuffix(r.Route, "/vms") {
					creates++
				}
			}
			if creates != tc.creates {
				t.Fatalf("creates = %d, want %d", creates, tc.creates)
			}
			n := 0
			for _, s := range f.sim.Snapshot().VMs {
				if s.Name == "m" {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d VMs named m", n)
			}
		})
	}
}

// TestImage: an id is used as it is (no call), a name is looked up in the location.
func TestImage(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name   string
		img    capvcov1.ImageSpec
		want   int
		errHas string
	}{
		{name: "by id", img: capvcov1.ImageSpec{ID: ptr.To(int64(42))}, want: 42},
		{name: "by name", img: capvcov1.ImageSpec{Name: vcosim.SeedImageName}, want: f.img},
		{name: "unknown name", img: capvcov1.ImageSpec{Name: "nope"}, errHas: `image "nope" in ` + vcosim.SeedLocation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := vm.Image(context.Background(), f.api, vcosim.SeedLocation, tc.img)
			if (tc.errHas == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.errHas)) {
				t.Fatalf("err = %v, want %q", err, tc.errHas)
			}
			if err == nil && got != tc.want {
				t.Fatalf("id = %d, want %d", got, tc.want)
			}
		})
	}
}
