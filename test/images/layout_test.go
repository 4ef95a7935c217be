package images

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func TestWriteLayout(t *testing.T) {
	dir := t.TempDir()
	spec := func(arch, content string) Spec {
		src := filepath.Join(dir, arch)
		writeFile(t, src, content, 0o755)
		return Spec{
			Files: []File{{Path: "/manager", Source: src, Mode: 0o755}}, Entrypoint: []string{"/manager"},
			User: NonRootUser, Architecture: arch, Labels: map[string]string{"org.opencontainers.image.version": "v1.2.3"},
		}
	}
	out := filepath.Join(dir, "layout")
	if err := WriteLayout(out, "ghcr.io/capx-io/thing:v1.2.3", spec("amd64", "a"), spec("arm64", "b")); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "ghcr.io/capx-io/thing:v1.2.3" {
		t.Fatalf("index.json: %+v", topManifest.Manifests)
	}
	idx, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex || len(im.Manifests) != 2 {
		t.Fatalf("image index: %s with %d manifests", im.MediaType, len(im.Manifests))
	}
	for i, want := range []string{"amd64", "arm64"} {
		d := im.Manifests[i]
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != want {
			t.Errorf("manifest %d: platform %+v, want linux/%s", i, d.Platform, want)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != want || cf.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" {
			t.Errorf("config of %s: %s, labels %v", want, cf.Architecture, cf.Config.Labels)
		}
		layers, _ := img.Layers()
		if mt, _ := layers[0].MediaType(); len(layers) != 1 || mt != types.OCILayer {
			t.Errorf("%s: %d layers, media type %s", want, len(layers), mt)
		}
	}

	// Same inputs, same bytes: the tarball is reproducible.
	tar1, tar2 := filepath.Join(dir, "1.tar"), filepath.Join(dir, "2.tar")
	if err := TarDir(out, tar1); err != nil {
		t.Fatal(err)
	}
	if err := WriteLayout(out, "ghcr.io/capx-io/thing:v1.2.3", spec("amd64", "a"), spec("arm64", "b")); err != nil {
		t.Fatal(err)
	}
	if err := TarDir(out, tar2); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(tar1)
	b, _ := os.ReadFile(tar2)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("two builds of the same layout differ (%d and %d bytes)", len(a), len(b))
	}

	if err := WriteLayout(out, "ghcr.io/capx-io/thing:v1", spec("amd64", "a"), spec("amd64", "b")); err == nil {
		t.Error("two images for one platform: no error")
	}
}
