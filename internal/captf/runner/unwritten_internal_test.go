package runner

import "testing"

// TestUnwritten: only a state recording nothing (what init writes into an empty backend) is
// replaced whatever its lineage; a state with a resource or an output, or one emptied by a
// destroy (a later serial), keeps the lineage check.
func TestUnwritten(t *testing.T) {
	for state, want := range map[string]bool{
		``:   false,
		"\n": false,
		`{"version":4,"serial":1,"lineage":"fresh","outputs":{},"resources":[]}`:                     true,
		`{"version":4,"serial":0,"lineage":"fresh"}`:                                                 true,
		`{"version":4,"serial":4,"lineage":"destroyed","outputs":{},"resources":[]}`:                 false,
		`{"version":4,"serial":3,"lineage":"l","outputs":{},"resources":[{"mode":"managed"}]}`:       false,
		`{"version":4,"serial":3,"lineage":"l","outputs":{"endpoint":{"value":"x"}},"resources":[]}`: false,
	} {
		got, err := unwritten([]byte(state))
		if err != nil || got != want {
			t.Errorf("unwritten(%q) = %v, %v; want %v", state, got, err, want)
		}
	}
	if _, err := unwritten([]byte("{not json")); err == nil {
		t.Error("a state that is not JSON was judged")
	}
}
