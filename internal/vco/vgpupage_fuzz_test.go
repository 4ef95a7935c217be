package vco

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzVGPUPageAnswer feeds arbitrary bytes to the list call's decoder, then lets the listing
// page through a server that answers that same page to every request, whatever the offset
// (a server that ignores start_after, miscounts, repeats ids): the listing must end, with an
// error or with distinct reservations of that page, and never claim a count it did not reach.
func FuzzVGPUPageAnswer(f *testing.F) {
	for _, s := range []string{
		`{"pagination":{"limit":25,"pages":1,"count":1},"data":[{"vgpu_id":"v","virtual_machine":{"id":0},"deletion_time":null}]}`,
		`{"pagination":{"limit":2,"pages":50,"count":100},"data":[{"vgpu_id":"a"},{"vgpu_id":"b"}]}`,
		`{"pagination":{"count":1000000000},"data":[{"vgpu_id":"a"},{"vgpu_id":"a"},{"vgpu_id":"b"}]}`,
		`{"pagination":{"count":-5},"data":[]}`,
		`{"pagination":{"count":3},"data":null}`,
		`{"data":[{"vgpu_id":""},{"vgpu_id":""}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var wire vgpuPage
		if json.Unmarshal(b, &wire) != nil {
			return
		}
		p := wire.page()
		calls := 0
		all, err := VGPUListing{Limit: 7}.Read(context.Background(), func(context.Context, int, int) (VGPUPage, error) {
			calls++
			return p, nil
		})
		if calls > 3*(maxIdlePages+2) {
			t.Fatalf("%d calls for a server that answers one page", calls)
		}
		in := map[string]bool{}
		for _, v := range p.Items {
			in[v.ID] = true
		}
		seen := map[string]bool{}
		for _, v := range all {
			if seen[v.ID] || !in[v.ID] {
				t.Fatalf("%q returned twice or never answered", v.ID)
			}
			seen[v.ID] = true
		}
		if err != nil {
			var le *VGPUListError
			if !errors.As(err, &le) || !errors.Is(err, ErrListChanged) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if len(p.Items) < p.Count {
			t.Fatalf("complete with %d of the %d counted", len(p.Items), p.Count)
		}
	})
}
