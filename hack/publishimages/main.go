// Command publishimages pushes the release's images and refuses to let the clusterctl
// components be published without them: every image of the project that the components name,
// and every add-on image their manager delivers into workload clusters, must be in the registry
// with the digest the release built (dist/images/images.json, written by hack/releaseimages).
// docs/release.md gives the order of a tagged release.
//
//	# push the images (after the build-only goreleaser run and hack/releaseimages), then check
//	go run ./hack/publishimages -push -images dist/images/images.json -save _artifacts/release/published-images.json \
//	    -components _artifacts/release/clusterctl/infrastructure-capx/<version>/infrastructure-components.yaml
//	# goreleaser's before hook: check only, against what was pushed
//	go run ./hack/publishimages -images _artifacts/release/published-images.json -components ...
//
// -map FROM=TO replaces a registry prefix (the tests push to a registry of their own). Registry
// credentials come from CAPX_REGISTRY_USERNAME and CAPX_REGISTRY_PASSWORD (for ghcr.io a user and
// a token that may write packages), else from the Docker config (docker or skopeo login).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/capx-io/capx/hack/dist"
	"github.com/capx-io/capx/internal/manifest"
)

// Image is an entry of hack/releaseimages' images.json.
type Image struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
	Layout string `json:"layout"`
}

type config struct {
	images     string
	push       bool
	save       string
	components []string
	from, to   string
	// addons are the add-on components the manager delivers from the project's images
	// (dist.AddonComponents): the components need them as much as the images they name.
	addons []string
}

func main() {
	var c config
	flag.StringVar(&c.images, "images", filepath.Join("dist", "images", "images.json"), "images.json of the release (hack/releaseimages)")
	flag.BoolVar(&c.push, "push", false, "push each image's OCI layout (beside images.json) to its name first")
	flag.StringVar(&c.save, "save", "", "after pushing, copy images.json here (goreleaser's --clean removes dist/)")
	mapping := flag.String("map", "", "FROM=TO: push to and check TO wherever a name starts with FROM")
	flag.Parse()
	c.components = flag.Args()
	if c.addons = dist.AddonComponents("."); len(c.addons) == 0 {
		fail(fmt.Errorf("no add-on component's cmd/ here: run from the repository root (the add-on images the manager delivers are checked too)"))
	}
	if *mapping != "" {
		var ok bool
		if c.from, c.to, ok = strings.Cut(*mapping, "="); !ok || c.from == "" || c.to == "" {
			fail(fmt.Errorf("-map %q is not FROM=TO", *mapping))
		}
	}
	if len(c.components) == 0 {
		fail(errors.New("name the clusterctl components to check (infrastructure-components.yaml)"))
	}
	opts := []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if u := os.Getenv("CAPX_REGISTRY_USERNAME"); u != "" {
		opts = []remote.Option{remote.WithAuth(&authn.Basic{Username: u, Password: os.Getenv("CAPX_REGISTRY_PASSWORD")})}
	}
	if err := run(context.Background(), c, opts...); err != nil {
		fail(err)
	}
}

func run(ctx context.Context, c config, opts ...remote.Option) error {
	b, err := os.ReadFile(c.images)
	if err != nil {
		return fmt.Errorf("%w (hack/releaseimages writes it; a tagged release saves it with -push -save)", err)
	}
	var built []Image
	if err := json.Unmarshal(b, &built); err != nil {
		return fmt.Errorf("%s: %w", c.images, err)
	}
	opts = append(opts, remote.WithContext(ctx))
	rename := func(s string) string {
		if c.from != "" && strings.HasPrefix(s, c.from) {
			return c.to + strings.TrimPrefix(s, c.from)
		}
		return s
	}
	if c.push {
		for _, img := range built {
			if err := push(filepath.Join(filepath.Dir(c.images), img.Layout), rename(img.Name), img.Digest, opts...); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "publishimages: pushed %s@%s\n", rename(img.Name), img.Digest)
		}
		if c.save != "" {
			if err := os.MkdirAll(filepath.Dir(c.save), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(c.save, b, 0o644); err != nil {
				return err
			}
		}
	}
	var refs []string
	for _, p := range c.components {
		r, err := componentImages(p)
		if err != nil {
			return err
		}
		refs = append(refs, r...)
	}
	addonRefs := delivered(refs, c.addons)
	refs = append(refs, addonRefs...)
	inRegistry := map[string]string{}
	for _, img := range built {
		ref, err := name.ParseReference(rename(img.Name))
		if err != nil {
			return err
		}
		d, err := remote.Head(ref, opts...)
		var te *transport.Error
		switch {
		case errors.As(err, &te) && te.StatusCode == 404:
			continue
		case err != nil:
			return fmt.Errorf("looking %s up in its registry: %w", ref, err)
		}
		inRegistry[img.Name] = d.Digest.String()
	}
	if errs := append(notBuilt(addonRefs, built), unpublished(refs, built, inRegistry)...); len(errs) > 0 {
		return fmt.Errorf("the components must not be published: %w", errors.Join(errs...))
	}
	fmt.Fprintf(os.Stderr, "publishimages: every image the components name is in its registry (%s)\n", strings.Join(refs, ", "))
	return nil
}

// unpublished says, for each image of the project the components name, why it may not be
// published yet: the release did not build it, it is not in the registry, or the registry
// holds another digest under its tag.
func unpublished(refs []string, built []Image, inRegistry map[string]string) []error {
	want := map[string]string{}
	repos := map[string]bool{}
	for _, img := range built {
		want[img.Name] = img.Digest
		repos[repository(img.Name)] = true
	}
	var errs []error
	for _, ref := range refs {
		digest, ours := want[ref]
		switch {
		case !ours && repos[repository(ref)]:
			errs = append(errs, fmt.Errorf("they name %s, which this release did not build (images.json lists other tags)", ref))
		case !ours:
			// Not the project's image (a module image, a third party's): not this release's to push.
		case inRegistry[ref] == "":
			errs = append(errs, fmt.Errorf("they name %s, which is not in its registry: push the images first (go run ./hack/publishimages -push, docs/release.md)", ref))
		case inRegistry[ref] != digest:
			errs = append(errs, fmt.Errorf("they name %s, which the registry holds as %s while this release built %s", ref, inRegistry[ref], digest))
		}
	}
	return errs
}

// delivered are the add-on images the manager of the components installs into workload
// clusters: <repository>/<component>:<tag> beside each <repository>/capx-manager:<tag> they run
// (the manager's --capvco-addon-image-repository default and its version).
func delivered(refs, components []string) []string {
	var out []string
	for _, ref := range refs {
		repo := repository(ref)
		prefix, ok := strings.CutSuffix(repo, "/capx-manager")
		if !ok || repo == ref {
			continue
		}
		for _, c := range components {
			out = append(out, prefix+"/"+c+ref[len(repo):])
		}
	}
	return out
}

// notBuilt names each delivered add-on image the release did not build (unpublished counts an
// image of another repository as a third party's).
func notBuilt(refs []string, built []Image) []error {
	var errs []error
	for _, ref := range refs {
		if !slices.ContainsFunc(built, func(i Image) bool { return i.Name == ref }) {
			errs = append(errs, fmt.Errorf("the manager they run delivers %s into workload clusters, which this release did not build (hack/releaseimages)", ref))
		}
	}
	return errs
}

func repository(ref string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

// componentImages are the images the components' workloads run: every container's image and
// every environment value naming an image (CAPX_RUNNER_IMAGE, the CAPTF Job runner), sorted,
// each once.
func componentImages(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := manifest.Objects(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	seen := map[string]bool{}
	for _, o := range objs {
		containers, _, _ := unstructuredSlice(o.Object, "spec", "template", "spec", "containers")
		inits, _, _ := unstructuredSlice(o.Object, "spec", "template", "spec", "initContainers")
		for _, c := range append(containers, inits...) {
			if img, ok := c["image"].(string); ok && img != "" {
				seen[img] = true
			}
			env, _ := c["env"].([]any)
			for _, e := range env {
				m, _ := e.(map[string]any)
				if n, _ := m["name"].(string); strings.HasSuffix(n, "_IMAGE") {
					if v, _ := m["value"].(string); v != "" {
						seen[v] = true
					}
				}
			}
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("%s runs no image: not clusterctl components", path)
	}
	out := make([]string, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	sort.Strings(out)
	return out, nil
}

func unstructuredSlice(obj map[string]any, fields ...string) ([]map[string]any, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[f]
	}
	items, ok := cur.([]any)
	if !ok {
		return nil, false, nil
	}
	var out []map[string]any
	for _, i := range items {
		if m, ok := i.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out, true, nil
}

// push writes the image index of an OCI layout (hack/releaseimages: an index holding one
// index of every platform) to ref.
func push(dir, ref, digest string, opts ...remote.Option) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		return fmt.Errorf("%s: %w (hack/releaseimages writes it)", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return err
	}
	m, err := top.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		return fmt.Errorf("%s: want one image index in index.json (%v)", dir, err)
	}
	if m.Manifests[0].Digest.String() != digest {
		return fmt.Errorf("%s holds %s, images.json lists %s", dir, m.Manifests[0].Digest, digest)
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		return err
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	if err := remote.WriteIndex(r, idx, opts...); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "publishimages:", err)
	os.Exit(1)
}
