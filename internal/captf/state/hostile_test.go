package state

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// hostileState is a small Secret that decompresses to a state of about size bytes whose whole
// bulk is one value in field ("outputs": one output's value; "resources": one resource's
// attribute): a few tens of KiB of gzip that any module can write.
func hostileState(field string, size int) string {
	bulk := strings.Repeat("A", size)
	head := `{"version":4,"serial":1,"lineage":"l-hostile",`
	switch field {
	case "outputs":
		return head + `"outputs":{"exports":{"value":"` + bulk + `","type":"string","sensitive":true}},"resources":[]}`
	default:
		return head + `"outputs":{},"resources":[{"mode":"managed","type":"terraform_data","name":"x","instances":[{"attributes":{"input":"` + bulk + `"}}]}]}`
	}
}

// allocated is how many bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHostileStates (issue 9): a state whose outputs, or one of whose values, are huge is
// refused with a clear reason, and reading it costs a bounded amount of memory, not a multiple
// of its decompressed size. (A 61 KB Secret decompressing to 64 MiB of one output value made one
// decode allocate 188 MiB.)
func TestHostileStates(t *testing.T) {
	const base = "tfstate-default-0123456789abcdef-m"
	tests := []struct {
		name, field string
		size        int
		wantMsg     string
	}{
		{"a 60 MiB output", "outputs", 60 << 20, "the state's outputs take more than 1024 KiB together"},
		{"outputs just over the bound", "outputs", MaxOutputsBytes + 1, "the state's outputs take more than 1024 KiB together"},
		{"a 60 MiB resource attribute", "resources", 60 << 20, `a single value of the state's field "resources" is larger than 16 MiB`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secrets := one(base, hostileState(tt.field, tt.size))
			t.Logf("%d bytes of gzip", len(secrets[0].Data["tfstate"]))
			var err error
			n := allocated(func() { _, err = Decode(secrets, "0123456789abcdef-m") })
			var se *Error
			if !errors.As(err, &se) || se.Reason != captfv1.StateCorruptReason || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("want StateCorrupt with %q, got %v", tt.wantMsg, err)
			}
			// The bound, the decoder's doubling buffer and the inflater's window, with room.
			limit := uint64(4*MaxValueBytes + (8 << 20))
			if tt.field == "outputs" {
				limit = 4*MaxOutputsBytes + (8 << 20)
			}
			if n > limit {
				t.Errorf("decoding allocated %d MiB, more than %d MiB", n>>20, limit>>20)
			}
			t.Logf("decoding allocated %.1f MiB", float64(n)/(1<<20))
		})
	}

	// Just below the bounds reads (the largest accepted outputs, a large resource).
	for _, field := range []string{"outputs", "resources"} {
		size := MaxOutputsBytes - 4096
		if field == "resources" {
			size = MaxValueBytes - 4096
		}
		snap, err := Decode(one(base, hostileState(field, size)), "0123456789abcdef-m")
		if err != nil {
			t.Fatalf("%s below the bound: %v", field, err)
		}
		if field == "outputs" && len(snap.Outputs["exports"].Value) < size {
			t.Fatalf("the output was not read whole")
		}
	}
}
