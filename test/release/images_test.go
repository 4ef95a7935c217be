//go:build release

package release

import (
	"archive/tar"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/capx-io/capx/hack/dist"
)

// TestImages reads the snapshot's OCI layouts back: the manager image, the module base image and
// the add-on images have one image per linux architecture goreleaser built the manager for; the
// module base has OpenTofu at /captf/runtime and an empty /captf/module; each add-on image its
// binaries, built from cmd/ as the manager is; all hold the base
// (users, CA roots, time zones, /tmp), carry the OCI labels, run as 65532 (the CSI driver as
// root), and the binary of this machine's image runs (the manager prints the snapshot's
// version, tofu its own, the add-ons their usage).
func TestImages(t *testing.T) {
	s := loadSnapshot(t)
	revision := s.revision
	var managerArchs []string
	for _, b := range dist.Filter(s.artifacts, dist.Binary, "manager") {
		if b.Goos == "linux" {
			managerArchs = append(managerArchs, b.Goarch)
		}
	}
	sort.Strings(managerArchs) // the images list their platforms in this order
	type imageCase struct {
		name, entrypoint string
		archs            []string
		args             []string
		want             string
		paths            map[string]byte // path in the image -> tar type
		user             string
	}
	cases := []imageCase{
		{"capx-manager", "/manager", managerArchs, []string{"version"}, s.version,
			withBase(map[string]byte{"manager": tar.TypeReg}), "65532:65532"},
		// The module base image too: a module built FROM it runs where the manager's Jobs do.
		{"captf-module-base", "/captf/runtime", managerArchs, []string{"version"}, "OpenTofu v",
			withBase(map[string]byte{"captf/runtime": tar.TypeReg, "captf/module": tar.TypeDir}), "65532:65532"},
	}
	// The add-ons the manager delivers (<repository>/<component>:<version>), for the same
	// architectures: each its cmd/ binary, which prints its usage; the CSI driver runs as root
	// (its node plugin mounts) and carries the tools (TestCSIDriverImageTools).
	for _, a := range addonBinaries {
		paths := map[string]byte{}
		for _, b := range a.binaries {
			paths[b] = tar.TypeReg
		}
		user := "65532:65532"
		if a.name == "capvco-csi-driver" {
			user = "0:0"
			paths["usr/sbin/mkfs.ext4"], paths["usr/sbin/mkfs.xfs"], paths["usr/sbin/cryptsetup"] = tar.TypeSymlink, tar.TypeReg, tar.TypeReg
		}
		cases = append(cases, imageCase{a.name, "/" + a.binaries[0], managerArchs, []string{"--help"}, "Usage:", withBase(paths), user})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(s.dist, "images", c.name)
			p, err := layout.FromPath(dir)
			if err != nil {
				t.Fatalf("%v: make release-snapshot writes it (hack/releaseimages)", err)
			}
			if _, err := os.Stat(dir + ".oci.tar"); err != nil {
				t.Error(err)
			}
			top, err := p.ImageIndex()
			if err != nil {
				t.Fatal(err)
			}
			tm, err := top.IndexManifest()
			if err != nil || len(tm.Manifests) != 1 {
				t.Fatalf("index.json: %v, %v", tm, err)
			}
			wantRef := "ghcr.io/capx-io/" + c.name + ":" + s.version
			if ref := tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; ref != wantRef {
				t.Errorf("ref %q, want %q", ref, wantRef)
			}
			idx, err := top.ImageIndex(tm.Manifests[0].Digest)
			if err != nil {
				t.Fatal(err)
			}
			im, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			var archs []string
			var host v1.Image
			for _, d := range im.Manifests {
				archs = append(archs, d.Platform.Architecture)
				img, err := idx.Image(d.Digest)
				if err != nil {
					t.Fatal(err)
				}
				cf, err := img.ConfigFile()
				if err != nil {
					t.Fatal(err)
				}
				labels := cf.Config.Labels
				for k, v := range map[string]string{
					"org.opencontainers.image.source":   "https://github.com/capx-io/capx",
					"org.opencontainers.image.version":  s.version,
					"org.opencontainers.image.revision": revision,
				} {
					if labels[k] != v {
						t.Errorf("%s: label %s=%q, want %q", d.Platform.Architecture, k, labels[k], v)
					}
				}
				if cf.Config.User != c.user || strings.Join(cf.Config.Entrypoint, " ") != c.entrypoint {
					t.Errorf("%s: user %q, entrypoint %v", d.Platform.Architecture, cf.Config.User, cf.Config.Entrypoint)
				}
				if d.Platform.Architecture == runtime.GOARCH {
					host = img
				}
				// Its SBOM names the image, its manifest digest and the commit.
				sbom, err := os.ReadFile(filepath.Join(s.dist, "images", c.name+"_linux_"+d.Platform.Architecture+".spdx.json"))
				if err != nil {
					t.Errorf("%v: hack/releaseimages writes an SBOM per image and platform", err)
				} else if sb := string(sbom); !strings.Contains(sb, `"name": "`+wantRef+`"`) || !strings.Contains(sb, d.Digest.Hex) || !strings.Contains(sb, revision) {
					t.Errorf("%s %s: the SBOM does not name %s, the digest %s and commit %s", c.name, d.Platform.Architecture, wantRef, d.Digest.Hex, revision)
				}
			}
			if c.archs != nil && strings.Join(archs, ",") != strings.Join(c.archs, ",") {
				t.Errorf("platforms %v, want %v (the manager's linux builds)", archs, c.archs)
			}
			if host == nil {
				t.Fatalf("no image for linux/%s among %v", runtime.GOARCH, archs)
			}
			// Unpack this machine's image and run its entrypoint.
			root := t.TempDir()
			seen := unpack(t, host, root)
			for path, typ := range c.paths {
				if seen[path] != typ {
					t.Errorf("%s: type %q in the image, want %q", path, seen[path], typ)
				}
			}
			if n := countCertificates(t, filepath.Join(root, "etc", "ssl", "certs", "ca-certificates.crt")); n < 100 {
				t.Errorf("the CA bundle Go reads holds %d certificates, want Mozilla's roots (over 100)", n)
			}
			if out := run(t, nil, filepath.Join(root, c.entrypoint), c.args...); !strings.Contains(out, c.want) {
				t.Errorf("%s %s printed %q, want %q in it", c.entrypoint, strings.Join(c.args, " "), out, c.want)
			}
			for _, a := range addonBinaries {
				if a.name == c.name {
					checkAddonBinaries(t, root, runtime.GOARCH, a.binaries)
				}
			}
		})
	}
}

// withBase adds what every image's base holds (hack/releaseimages, test/images/base.go): the
// users, the CA roots where Go looks for them, the time zone database, /tmp.
func withBase(paths map[string]byte) map[string]byte {
	for p, typ := range map[string]byte{"etc/passwd": tar.TypeReg, "etc/group": tar.TypeReg,
		"etc/ssl/certs/ca-certificates.crt": tar.TypeReg, "usr/share/zoneinfo/Europe/Amsterdam": tar.TypeReg,
		"tmp": tar.TypeDir, "home/nonroot": tar.TypeDir} {
		paths[p] = typ
	}
	return paths
}

// countCertificates parses a PEM bundle and counts its certificates.
func countCertificates(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return n
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			t.Fatalf("%s: certificate %d: %v", path, n+1, err)
		}
		n++
	}
}

// unpack writes an image's files and links under root and returns each path's tar type.
func unpack(t *testing.T, img v1.Image, root string) map[string]byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	seen := map[string]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return seen
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[strings.TrimSuffix(h.Name, "/")] = h.Typeflag
		target := filepath.Join(root, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				t.Fatal(err)
			}
		}
	}
}
