//go:build release

package release

import (
	"io"
	"log"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

// TestComponentsRefusedWithoutImages runs hack/publishimages, as a tagged release's goreleaser
// before hook does, on the snapshot's images and clusterctl components against a registry of
// the test's own (the names mapped from ghcr.io/capx-io): the components are refused while the
// manager image they name, or an add-on image that manager delivers, is not in the registry, and
// accepted once the snapshot's images are pushed.
func TestComponentsRefusedWithoutImages(t *testing.T) {
	s := loadSnapshot(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	tool := filepath.Join(t.TempDir(), "publishimages")
	if out, err := exec.Command("go", "build", "-o", tool, filepath.Join(s.root, "hack", "publishimages")).CombinedOutput(); err != nil {
		t.Fatalf("building hack/publishimages: %v\n%s", err, out)
	}
	components := filepath.Join(s.root, "_artifacts", "release", "clusterctl", "infrastructure-capx", s.version, "infrastructure-components.yaml")
	images := filepath.Join(s.dist, "images", "images.json")
	check := func(args ...string) (string, error) {
		cmd := exec.Command(tool, append(append([]string{"-images", images, "-map", "ghcr.io/capx-io=" + host + "/capx-io"}, args...), components)...)
		cmd.Dir = s.root // as make release-publish runs it
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := check()
	if err == nil || !strings.Contains(out, "ghcr.io/capx-io/capx-manager:"+s.version+", which is not in its registry") {
		t.Fatalf("before the push: %v\n%s\nwant a refusal naming the manager image", err, out)
	}
	// The add-on images its manager delivers into workload clusters count too.
	for _, a := range addonBinaries {
		if !strings.Contains(out, "ghcr.io/capx-io/"+a.name+":"+s.version+", which is not in its registry") {
			t.Errorf("before the push: the refusal does not name the add-on image %s:%s\n%s", a.name, s.version, out)
		}
	}
	if out, err := check("-push"); err != nil {
		t.Fatalf("push: %v\n%s", err, out)
	}
	if out, err := check(); err != nil {
		t.Fatalf("after the push: %v\n%s", err, out)
	}
}
