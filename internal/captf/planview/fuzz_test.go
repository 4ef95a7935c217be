package planview

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzFromPlan: any plan JSON renders without panicking, and a value marked sensitive never
// shows up in the view.
func FuzzFromPlan(f *testing.F) {
	seed, _ := os.ReadFile("testdata/plan.json")
	f.Add(seed)
	f.Add([]byte(`{"resource_changes":[{"address":"a","change":{"actions":["update"],"before":{"s":"SECRETVALUE1"},"after":{"s":"SECRETVALUE2"},"before_sensitive":{"s":true},"after_sensitive":{"s":true}}}]}`))
	f.Add([]byte(`{"resource_changes":[{"address":"a","change":{"actions":["create"],"after":[1,[2,{"x":null}]],"after_unknown":[false,[true]],"replace_paths":[[1,"x"],"bad",[{}]]}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := &tfjson.Plan{}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if d.Decode(p) != nil {
			return
		}
		v := FromPlan(p, nil)
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, rc := range p.ResourceChanges {
			if rc == nil || rc.Change == nil {
				continue
			}
			for _, pair := range [][2]any{{rc.Change.Before, rc.Change.BeforeSensitive}, {rc.Change.After, rc.Change.AfterSensitive}} {
				for _, s := range sensitiveStrings(pair[0], pair[1], false) {
					if len(s) >= 8 && strings.HasPrefix(s, "SECRET") && bytes.Contains(out, []byte(s)) {
						t.Fatalf("sensitive %q leaked: %s", s, out)
					}
				}
			}
		}
	})
}

func sensitiveStrings(v, sens any, under bool) []string {
	under = under || isTrue(sens)
	switch t := v.(type) {
	case string:
		if under {
			return []string{t}
		}
	case map[string]any:
		sm, _ := sens.(map[string]any)
		var out []string
		for k, e := range t {
			out = append(out, sensitiveStrings(e, sm[k], under)...)
		}
		return out
	case []any:
		sl, _ := sens.([]any)
		var out []string
		for i, e := range t {
			var s any
			if i < len(sl) {
				s = sl[i]
			}
			out = append(out, sensitiveStrings(e, s, under)...)
		}
		return out
	}
	return nil
}

// FuzzDecode: any Secret content is refused or decoded, never a panic or an unbounded read.
func FuzzDecode(f *testing.F) {
	good, _ := Encode(bigView(3), "p", "ns", nil)
	f.Add(good[0].Data[DataKey], "1")
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, "1")
	f.Fuzz(func(t *testing.T, data []byte, chunks string) {
		// The digest matches, so the fuzzer reaches the gzip and JSON parsing behind it.
		sum := sha256.Sum256(data)
		digest := hex.EncodeToString(sum[:])
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ChunkName("p", 0), Annotations: map[string]string{
			PlanAnnotation: "p", ChunksAnnotation: chunks, DigestAnnotation: digest}}, Data: map[string][]byte{DataKey: data}}
		_, _ = Decode("p", []*corev1.Secret{s})
	})
}
