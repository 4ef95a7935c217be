package vcosim

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capx-io/capx/internal/version"
)

// TestVersionCommand: `vcosim version` prints the build and serves nothing (it returns); a
// stray argument is refused before anything listens.
func TestVersionCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"version"}, &out, &errOut); code != 0 || out.String() != "vcosim "+version.Get().String()+"\n" {
		t.Errorf("version: exit %d, printed %q (stderr %q)", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := Main([]string{"version", "-o", "json"}, &out, &errOut); code != 0 {
		t.Fatalf("version -o json: exit %d: %s", code, errOut.String())
	}
	var got struct {
		Binary string       `json:"binary"`
		Build  version.Info `json:"build"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Binary != "vcosim" || got.Build != version.Get() {
		t.Errorf("version -o json: %v, %+v", err, got)
	}
	for _, args := range [][]string{{"version", "-o", "xml"}, {"version", "extra"}, {"serve"}, {"-quiet", "versoin"}} {
		errOut.Reset()
		if code := Main(args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "vcosim") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, errOut.String())
		}
	}
}
