package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

const components = `apiVersion: apps/v1
kind: Deployment
metadata: {name: capx-controller-manager, namespace: capx-system}
spec:
  template:
    spec:
      containers:
      - name: manager
        image: ghcr.io/capx-io/capx-manager:v1.0.0
        env:
        - {name: CAPX_RUNNER_IMAGE, value: ghcr.io/capx-io/capx-manager:v1.0.0}
        - {name: CAPX_PROVIDERS, value: "captf,capvco"}
      - name: proxy
        image: registry.k8s.io/kube-rbac-proxy:v0.18.0
`

// release writes what hack/releaseimages writes: an OCI layout holding an index of one index,
// and images.json naming it.
func release(t *testing.T, dir string) string {
	t.Helper()
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	platform := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	p, err := layout.Write(filepath.Join(dir, "capx-manager"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(platform); err != nil {
		t.Fatal(err)
	}
	d, err := platform.Digest()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal([]Image{{Name: "ghcr.io/capx-io/capx-manager:v1.0.0", Digest: d.String(), Layout: "capx-manager"}})
	images := filepath.Join(dir, "images.json")
	if err := os.WriteFile(images, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return images
}

// TestComponentsNeedTheirImages: the check refuses the components while the registry lacks the
// image they run, pushing makes it pass, and a registry holding another build under the tag is
// refused again.
func TestComponentsNeedTheirImages(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	comp := filepath.Join(dir, "infrastructure-components.yaml")
	if err := os.WriteFile(comp, []byte(components), 0o644); err != nil {
		t.Fatal(err)
	}
	c := config{images: release(t, dir), components: []string{comp}, from: "ghcr.io/capx-io", to: host + "/capx-io"}
	ctx := context.Background()

	err := run(ctx, c)
	if err == nil || !strings.Contains(err.Error(), "ghcr.io/capx-io/capx-manager:v1.0.0, which is not in its registry") {
		t.Fatalf("before pushing: %v; want a refusal naming the manager image", err)
	}

	c.push, c.save = true, filepath.Join(dir, "saved", "images.json")
	if err := run(ctx, c); err != nil {
		t.Fatalf("push: %v", err)
	}
	if _, err := os.Stat(c.save); err != nil {
		t.Errorf("-save: %v", err)
	}
	c.push = false
	// goreleaser's before hook checks against the saved copy: no layouts beside it (only -push
	// reads them).
	if err := run(ctx, config{images: c.save, components: c.components, from: c.from, to: c.to}); err != nil {
		t.Fatalf("checking against the saved images.json: %v", err)
	}

	// Another build under the same tag.
	other := t.TempDir()
	c2 := config{images: release(t, other), components: c.components, from: c.from, to: c.to, push: true}
	if err := run(ctx, c2); err != nil {
		t.Fatal(err)
	}
	err = run(ctx, c)
	if err == nil || !strings.Contains(err.Error(), "while this release built") {
		t.Fatalf("with another build under the tag: %v; want the digest mismatch", err)
	}
}

// TestUnpublished: the decision on its own: only the project's images count, a tag the release
// did not build is named.
func TestUnpublished(t *testing.T) {
	built := []Image{{Name: "ghcr.io/capx-io/capx-manager:v1.0.0", Digest: "sha256:a"}}
	for _, c := range []struct {
		refs     []string
		registry map[string]string
		want     string
	}{
		{[]string{"ghcr.io/capx-io/capx-manager:v1.0.0", "registry.k8s.io/pause:3.10"}, map[string]string{"ghcr.io/capx-io/capx-manager:v1.0.0": "sha256:a"}, ""},
		{[]string{"ghcr.io/capx-io/capx-manager:v1.0.0"}, nil, "not in its registry"},
		{[]string{"ghcr.io/capx-io/capx-manager:v0.9.0"}, map[string]string{"ghcr.io/capx-io/capx-manager:v1.0.0": "sha256:a"}, "did not build"},
		{[]string{"ghcr.io/capx-io/capx-manager:v1.0.0"}, map[string]string{"ghcr.io/capx-io/capx-manager:v1.0.0": "sha256:b"}, "holds"},
	} {
		err := errors.Join(unpublished(c.refs, built, c.registry)...)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v with %v: %v, want %q", c.refs, c.registry, err, c.want)
		}
	}
}

func TestComponentImages(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(components), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := componentImages(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "ghcr.io/capx-io/capx-manager:v1.0.0 registry.k8s.io/kube-rbac-proxy:v0.18.0" {
		t.Errorf("images %v", got)
	}
}

// TestDeliveredAddons: the manager the components run names its add-on images under its own
// repository and tag, and an add-on image the release did not build refuses the components even
// though its repository is not among the release's images.
func TestDeliveredAddons(t *testing.T) {
	refs := []string{"ghcr.io/capx-io/capx-manager:v1.0.0", "registry.k8s.io/kube-rbac-proxy:v0.18.0"}
	got := delivered(refs, []string{"capvco-csi-driver", "capvco-sriov-agent"})
	if strings.Join(got, " ") != "ghcr.io/capx-io/capvco-csi-driver:v1.0.0 ghcr.io/capx-io/capvco-sriov-agent:v1.0.0" {
		t.Fatalf("delivered %v", got)
	}
	built := []Image{{Name: "ghcr.io/capx-io/capx-manager:v1.0.0", Digest: "sha256:a"}, {Name: "ghcr.io/capx-io/capvco-csi-driver:v1.0.0", Digest: "sha256:b"}}
	errs := notBuilt(got, built)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "delivers ghcr.io/capx-io/capvco-sriov-agent:v1.0.0 into workload clusters, which this release did not build") {
		t.Errorf("not built: %v", errs)
	}
	// The same through run: the manager's image is pushed, the add-on image is not built.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	dir := t.TempDir()
	comp := filepath.Join(dir, "infrastructure-components.yaml")
	if err := os.WriteFile(comp, []byte(components), 0o644); err != nil {
		t.Fatal(err)
	}
	c := config{images: release(t, dir), components: []string{comp}, from: "ghcr.io/capx-io", to: strings.TrimPrefix(srv.URL, "http://") + "/capx-io",
		push: true, addons: []string{"capvco-csi-driver"}}
	err := run(context.Background(), c)
	if err == nil || !strings.Contains(err.Error(), "delivers ghcr.io/capx-io/capvco-csi-driver:v1.0.0 into workload clusters, which this release did not build") {
		t.Errorf("components whose manager delivers an image the release lacks: %v, want a refusal naming it", err)
	}
}
