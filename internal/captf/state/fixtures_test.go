package state

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fixture is one frozen capture under testdata/ (see testdata/README.md): the state Secrets
// the backend's selector returns for Suffix, and the lock Lease if there was one.
type fixture struct {
	Description string                `json:"description"`
	Suffix      string                `json:"suffix"`
	Secrets     []corev1.Secret       `json:"secrets"`
	Lease       *coordinationv1.Lease `json:"lease,omitempty"`
}

func fixtureNames(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".json"))
	}
	sort.Strings(names)
	return names
}

func loadFixture(t testing.TB, name string) fixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatalf("read fixture %s: %v (regenerate with UPDATE_FIXTURES=1 go test -run TestUpdateFixtures)", name, err)
	}
	var f fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("decode fixture %s: %v", name, err)
	}
	return f
}

func writeFixture(t testing.TB, name string, f fixture) {
	t.Helper()
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", name+".json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// frozen strips what the API server adds (UIDs, resourceVersions, managedFields, timestamps):
// it would only make fixtures differ between captures and could not be created again.
func frozen(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, Labels: m.Labels, Annotations: m.Annotations,
	}
}
