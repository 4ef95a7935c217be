package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"reflect"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/capx-io/capx/config/admission"
)

func TestLoneVariablesAreQuoted(t *testing.T) {
	in := `        - name: A
          value: ${CAPX_STATE_BACKUPS:=5}
        - name: B
          value: ${CAPX_WATCH_FILTER:=""}
          value: prefix-${X}
`
	want := `        - name: A
          value: '${CAPX_STATE_BACKUPS:=5}'
        - name: B
          value: ${CAPX_WATCH_FILTER:=""}
          value: prefix-${X}
`
	if got := string(loneVariable.ReplaceAll([]byte(in), []byte("${1}'${2}'"))); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestCheckSeries(t *testing.T) {
	md := []byte("releaseSeries:\n- major: 0\n  minor: 1\n  contract: v1beta2\n")
	if err := checkSeries(md, "v0.1.0-snapshot.gabc"); err != nil {
		t.Error(err)
	}
	if err := checkSeries(md, "v0.2.0"); err == nil {
		t.Error("v0.2.0 is not in the metadata: no error")
	}
}

// TestPoliciesSurviveKustomize renders the release and the local install as their installers do
// and compares every admission policy in them with the one the manager embeds: the manager
// honours approvals only while the API server has exactly its policies, so a rendering that
// changes an expression (kustomize re-emits folded YAML scalars, and did add a blank line to
// every more-indented line) leaves every approval unapplied.
func TestPoliciesSurviveKustomize(t *testing.T) {
	shipped := policies(t, "config/admission (embedded)", concatenated(t, admission.Files))
	if len(shipped) == 0 {
		t.Fatal("config/admission embeds no ValidatingAdmissionPolicy")
	}
	for _, dir := range []string{"release", "local"} {
		out, err := kustomize(filepath.Join("..", "..", "config", dir))
		if err != nil {
			t.Fatal(err)
		}
		rendered := policies(t, "config/"+dir, out)
		for name, want := range shipped {
			got, ok := rendered[name]
			switch {
			case !ok:
				t.Errorf("config/%s installs no ValidatingAdmissionPolicy %s", dir, name)
			case !reflect.DeepEqual(got.Spec.Variables, want.Spec.Variables):
				t.Errorf("config/%s: %s: variables differ from the embedded ones:\n got %+v\nwant %+v", dir, name, got.Spec.Variables, want.Spec.Variables)
			case !reflect.DeepEqual(got.Spec.Validations, want.Spec.Validations):
				t.Errorf("config/%s: %s: validations differ from the embedded ones:\n got %+v\nwant %+v", dir, name, got.Spec.Validations, want.Spec.Validations)
			case !reflect.DeepEqual(got.Spec.MatchConditions, want.Spec.MatchConditions):
				t.Errorf("config/%s: %s: matchConditions differ from the embedded ones:\n got %+v\nwant %+v", dir, name, got.Spec.MatchConditions, want.Spec.MatchConditions)
			}
		}
	}
}

func concatenated(t *testing.T, files fs.FS) []byte {
	t.Helper()
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, n := range names {
		b, err := fs.ReadFile(files, n)
		if err != nil {
			t.Fatal(err)
		}
		all = append(append(all, "\n---\n"...), b...)
	}
	return all
}

func policies(t *testing.T, from string, data []byte) map[string]admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	out := map[string]admissionregistrationv1.ValidatingAdmissionPolicy{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", from, err)
		}
		if p.Kind == "ValidatingAdmissionPolicy" {
			out[p.Name] = p
		}
	}
}
