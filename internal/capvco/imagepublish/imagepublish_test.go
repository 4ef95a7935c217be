package imagepublish_test

import (
	"context"
	"errors"
	"testing"

	"github.com/capx-io/capx/internal/capvco/imagepublish"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

// TestEnsure runs against the simulator: a visible image costs one read; a hidden one is
// published by the operator and then visible; without a publisher it is reported; the cluster's
// credential in the publisher's place gets 403; an unknown id is ErrNoSuchImage.
func TestEnsure(t *testing.T) {
	ctx := context.Background()
	seed := vcosim.DefaultSeed()
	for _, name := range []string{"hidden-1", "hidden-2", "hidden-3"} {
		seed.Images = append(seed.Images, vcosim.Image{Location: vcosim.SeedLocation2, Name: name, OSType: "Linux", BootType: "bios", BootDiskSize: 10, Memory: 512})
	}
	sim := vcosim.NewTestServer(t, vcosim.Options{Seed: &seed})
	op, cluster := vcotest.Client(t, sim, vcosim.SeedOperatorPrinc), vcotest.Client(t, sim, vcosim.SeedClusterPrinc)
	ids := map[string]int64{}
	for _, img := range sim.Snapshot().Images {
		if img.Location == vcosim.SeedLocation2 {
			ids[img.Name] = int64(img.ID)
		}
	}
	ensure := func(p imagepublish.Publisher, id int64) imagepublish.Outcome {
		t.Helper()
		out, err := imagepublish.Ensure(ctx, cluster, p, map[string]int64{vcosim.SeedLocation2: id, "elsewhere": 1}, []string{vcosim.SeedLocation2, vcosim.SeedLocation2})
		if err != nil || len(out) != 1 {
			t.Fatalf("Ensure: %+v, %v", out, err)
		}
		return out[0]
	}

	sim.ResetRequests()
	if o := ensure(op, ids[vcosim.SeedImageName]); !o.Visible || o.Published || o.Err != nil {
		t.Errorf("visible image: %+v", o)
	}
	if n := len(sim.Requests()); n != 1 {
		t.Errorf("a visible image took %d calls, want 1", n)
	}
	if o := ensure(op, ids["hidden-1"]); !o.Visible || !o.Published || o.Err != nil {
		t.Errorf("published by the operator: %+v", o)
	}
	if o := ensure(nil, ids["hidden-2"]); o.Visible || !errors.Is(o.Err, imagepublish.ErrNotVisible) {
		t.Errorf("no publisher: %+v", o)
	}
	if o := ensure(cluster, ids["hidden-3"]); o.Visible || !errors.Is(o.Err, vco.ErrForbidden) {
		t.Errorf("the cluster's credential publishing: %+v", o)
	}
	if o := ensure(op, 999999); o.Visible || !errors.Is(o.Err, imagepublish.ErrNoSuchImage) {
		t.Errorf("unknown image: %+v", o)
	}
	for _, img := range sim.Snapshot().Images {
		if want := img.Name != "hidden-2" && img.Name != "hidden-3"; img.Public != want {
			t.Errorf("image %s public=%v, want %v", img.Name, img.Public, want)
		}
	}
}
