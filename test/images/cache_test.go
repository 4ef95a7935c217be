package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteCached(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "bin")
	writeFile(t, src, "v1", 0o755)
	spec := func() Spec {
		return Spec{Files: []File{{Path: "/bin", Source: src, Mode: 0o755}}, Entrypoint: []string{"/bin"}, User: NonRootUser}
	}
	out := filepath.Join(dir, "out")

	first, err := WriteCached("capx.local/thing", spec(), out)
	if err != nil {
		t.Fatal(err)
	}
	if first.Reused || !strings.HasPrefix(first.Ref, "capx.local/thing:") || len(first.Ref) != len("capx.local/thing:")+TagLen {
		t.Fatalf("first build: %+v", first)
	}
	again, err := WriteCached("capx.local/thing", spec(), out)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Reused || again.Ref != first.Ref || again.Tarball != first.Tarball {
		t.Fatalf("same content: %+v, want the first build reused (%+v)", again, first)
	}

	// Another content is another tag; the old tarball goes.
	writeFile(t, src, "v2", 0o755)
	changed, err := WriteCached("capx.local/thing", spec(), out)
	if err != nil {
		t.Fatal(err)
	}
	if changed.Reused || changed.Ref == first.Ref {
		t.Fatalf("changed content: %+v, first %+v", changed, first)
	}
	if _, err := os.Stat(first.Tarball); !os.IsNotExist(err) {
		t.Errorf("the old tarball %s is still there (%v)", first.Tarball, err)
	}
	if _, err := os.Stat(changed.Tarball); err != nil {
		t.Error(err)
	}

	// Metadata counts too.
	s := spec()
	s.User = "1000"
	other, err := WriteCached("capx.local/thing", s, out)
	if err != nil {
		t.Fatal(err)
	}
	if other.Ref == changed.Ref {
		t.Errorf("a different user gave the same tag %s", other.Ref)
	}
}

func TestKeyIgnoresTheRef(t *testing.T) {
	a := Spec{Ref: "capx.local/a:1", Files: []File{{Path: "/x", Data: []byte("x")}}}
	b := a
	b.Ref = "capx.local/b:2"
	ka, err := Key(a)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := Key(b)
	if err != nil {
		t.Fatal(err)
	}
	if ka != kb {
		t.Errorf("keys differ by ref: %s %s", ka, kb)
	}
	b.Files = []File{{Path: "/x", Data: []byte("y")}}
	if kc, _ := Key(b); kc == ka {
		t.Error("different content, same key")
	}
}
