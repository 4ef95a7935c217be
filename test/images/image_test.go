package images

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestWriteTarballRoundTrip(t *testing.T) {
	dir := t.TempDir()
	module := filepath.Join(dir, "module")
	if err := os.MkdirAll(filepath.Join(module, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(module, "main.tf"), "output \"x\" { value = 1 }\n", 0o644)
	writeFile(t, filepath.Join(module, "sub", "s.tf"), "", 0o644)
	runtimeBin := filepath.Join(dir, "tofu")
	writeFile(t, runtimeBin, "#!fake", 0o755)

	m := TofuModule{Ref: "capx.local/module-test:1", ModuleDir: module, Runtime: runtimeBin, Role: "cluster"}
	tarPath := filepath.Join(dir, "img.tar")
	if err := m.WriteTarball(tarPath); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(m.Ref)
	img, err := tarball.ImageFromPath(tarPath, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != NonRootUser || cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("config: user=%q os=%q arch=%q", cf.Config.User, cf.OS, cf.Architecture)
	}
	if cf.Config.Labels["io.captf.contract"] != "v1alpha1" || cf.Config.Labels["io.captf.role"] != "cluster" {
		t.Errorf("labels: %v", cf.Config.Labels)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string]*tar.Header{}
	var order []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
		order = append(order, h.Name)
	}
	want := []string{"captf/", "captf/module/", "captf/module/main.tf", "captf/module/sub/", "captf/module/sub/s.tf", "captf/runtime"}
	if len(order) != len(want) {
		t.Fatalf("entries %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("entries %v, want %v", order, want)
		}
	}
	if m := got["captf/runtime"].Mode; m != 0o755 {
		t.Errorf("runtime mode %o", m)
	}
	if m := got["captf/module/main.tf"].Mode; m != 0o644 {
		t.Errorf("main.tf mode %o", m)
	}

	// Same inputs, same image: digests are reproducible.
	tarPath2 := filepath.Join(dir, "img2.tar")
	if err := m.WriteTarball(tarPath2); err != nil {
		t.Fatal(err)
	}
	img2, err := tarball.ImageFromPath(tarPath2, &tag)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := img2.Digest()
	if d1 != d2 {
		t.Errorf("digest differs between builds: %s vs %s", d1, d2)
	}
}

func TestBuildRejectsBadFiles(t *testing.T) {
	cases := map[string][]File{
		"relative path":    {{Path: "etc/x", Data: []byte("x")}},
		"unclean path":     {{Path: "/etc/../x", Data: []byte("x")}},
		"two kinds":        {{Path: "/x", Data: []byte("x"), Symlink: "/y"}},
		"duplicate":        {{Path: "/x", Data: []byte("x")}, {Path: "/x", Data: []byte("y")}},
		"file as a parent": {{Path: "/x", Data: []byte("x")}, {Path: "/x/y", Data: []byte("y")}},
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			_, cleanup, err := Build(Spec{Ref: "capx.local/bad:1", Files: files})
			if err == nil {
				cleanup()
				t.Fatal("want an error")
			}
		})
	}
}

func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}
