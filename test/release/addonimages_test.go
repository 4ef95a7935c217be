//go:build release

package release

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/capx-io/capx/hack/dist"
	"github.com/capx-io/capx/internal/capvco/addons"
)

// addonBinaries are the add-on images the manager names (<repository>/<component>:<version>)
// and the binaries each holds at its root, the entrypoint first.
var addonBinaries = []struct {
	name     string
	binaries []string
}{
	{"capvco-cloud-controller-manager", []string{"capvco-cloud-controller-manager"}},
	{"capvco-csi-driver", []string{"capvco-csi-driver"}},
	{"capvco-external-dns-webhook", []string{"capvco-external-dns-webhook"}},
	{"capvco-sriov-agent", []string{"capvco-sriov-agent", "capvco-sriov"}},
}

// TestAddonImagesListed: images.json (what make release-publish pushes) lists an image for every
// add-on component of the project the manager delivers, under the name the manager gives it.
func TestAddonImagesListed(t *testing.T) {
	s := loadSnapshot(t)
	project := dist.AddonComponents(s.root)
	var names []string
	for _, a := range addonBinaries {
		names = append(names, a.name)
	}
	if !slices.Equal(project, names) {
		t.Errorf("the project's add-on components are %v, this test checks %v", project, names)
	}
	b, err := os.ReadFile(filepath.Join(s.dist, "images", "images.json"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []struct{ Name, Digest string }
	if err := json.Unmarshal(b, &listed); err != nil {
		t.Fatal(err)
	}
	settings := addons.Settings{ImageRepository: addons.DefaultImageRepository, Version: s.version}
	for _, c := range project {
		want := settings.Image(c)
		if !slices.ContainsFunc(listed, func(i struct{ Name, Digest string }) bool { return i.Name == want && i.Digest != "" }) {
			t.Errorf("images.json does not list %s, the image the manager delivers for %s: %s", want, c, b)
		}
	}
}

// checkAddonBinaries: each binary of an unpacked add-on image is its cmd/ package's, built as
// goreleaser builds the manager: static, -trimpath, for the image's platform.
func checkAddonBinaries(t *testing.T, root, arch string, bins []string) {
	t.Helper()
	for _, b := range bins {
		info, err := buildinfo.ReadFile(filepath.Join(root, b))
		if err != nil {
			t.Errorf("/%s: %v", b, err)
			continue
		}
		for _, want := range []debug.BuildSetting{{Key: "CGO_ENABLED", Value: "0"}, {Key: "-trimpath", Value: "true"}, {Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: arch}} {
			if !slices.Contains(info.Settings, want) {
				t.Errorf("/%s: build settings %v lack %s=%s", b, info.Settings, want.Key, want.Value)
			}
		}
		if info.Path != "github.com/capx-io/capx/cmd/"+b {
			t.Errorf("/%s: built from %s, want cmd/%s", b, info.Path, b)
		}
	}
}

// csiTools are the programs the CSI driver runs by name (k8s.io/mount-utils and
// internal/capvco/csi/luks), with the Debian package each comes from.
var csiTools = map[string]string{
	"mount": "mount", "umount": "mount", "blkid": "util-linux", "fsck": "util-linux", "blockdev": "util-linux",
	"mkfs.ext4": "e2fsprogs", "fsck.ext4": "e2fsprogs", "resize2fs": "e2fsprogs",
	"mkfs.xfs": "xfsprogs", "xfs_repair": "xfsprogs", "xfs_growfs": "xfsprogs", "cryptsetup": "cryptsetup-bin",
}

// TestCSIDriverImageTools unpacks this machine's capvco-csi-driver image and runs its tools inside
// it (chroot, with /proc as a container has: nothing else of the host is reachable): every program the driver runs is found through
// the image's PATH, is the file of this machine's Debian package (hack/install-deps.sh), and
// works with the libraries the image carries: ext4 and xfs are made on files and blkid names
// them, e2fsck and xfs_repair check them, cryptsetup and the others run. The SBOM names each
// package with its installed version.
func TestCSIDriverImageTools(t *testing.T) {
	s := loadSnapshot(t)
	dir := filepath.Join(s.dist, "images", "capvco-csi-driver")
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatalf("%v: make release-snapshot writes it (hack/releaseimages)", err)
	}
	top, _ := p.ImageIndex()
	tm, err := top.IndexManifest()
	if err != nil || len(tm.Manifests) != 1 {
		t.Fatalf("index.json: %v", err)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	var env []string
	root := t.TempDir()
	for _, d := range im.Manifests {
		if d.Platform.Architecture != runtime.GOARCH {
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, _ := img.ConfigFile()
		env = cf.Config.Env
		unpack(t, img, root)
	}
	if env == nil {
		t.Fatalf("no linux/%s image with an environment among %v", runtime.GOARCH, im.Manifests)
	}
	var pathDirs []string
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			pathDirs = strings.Split(v, ":")
		}
	}
	found := map[string]string{}
	for tool, pkg := range csiTools {
		for _, d := range pathDirs {
			if real, ok := resolveIn(root, path.Join(d, tool)); ok {
				found[tool] = real
				break
			}
		}
		if found[tool] == "" {
			t.Errorf("%s (Debian's %s) is not on the image's PATH %v", tool, pkg, pathDirs)
			continue
		}
		host, err := exec.LookPath(tool)
		if err != nil {
			t.Errorf("%s is not installed here (hack/install-deps.sh installs %s): %v", tool, pkg, err)
			continue
		}
		if sum(t, filepath.Join(root, found[tool])) != sum(t, host) {
			t.Errorf("the image's %s (%s) is not this machine's %s of package %s", tool, found[tool], host, pkg)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// As in a container: the image's root, with /proc (its /etc/mtab links there).
	if os.Geteuid() != 0 {
		t.Fatal("running the image's tools needs root (chroot, /proc): make release-test runs as root in CI (.ci/run)")
	}
	proc := filepath.Join(root, "proc")
	if err := os.MkdirAll(proc, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("proc", proc, "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(proc, syscall.MNT_DETACH); err != nil {
			t.Error(err)
		}
	})
	in := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		cmd := exec.Command(found[args[0]], args[1:]...)
		cmd.Args[0] = args[0] // as the driver runs it, by name: mke2fs is ext4's as mkfs.ext4
		cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, "/", &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		if err := cmd.Run(); err != nil {
			t.Fatalf("in the image: %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	for file, size := range map[string]int64{"ext4.img": 64 << 20, "xfs.img": 320 << 20} {
		if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o1777); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(filepath.Join(root, "tmp", file), 0); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(root, "tmp", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	in("mkfs.ext4", "-F", "-q", "/tmp/ext4.img")
	in("fsck.ext4", "-f", "-n", "/tmp/ext4.img")
	in("resize2fs", "-P", "/tmp/ext4.img")
	in("mkfs.xfs", "-f", "-q", "/tmp/xfs.img")
	in("xfs_repair", "-n", "-f", "/tmp/xfs.img")
	for file, want := range map[string]string{"ext4.img": "ext4", "xfs.img": "xfs"} {
		if got := strings.TrimSpace(in("blkid", "-p", "-o", "value", "-s", "TYPE", "/tmp/"+file)); got != want {
			t.Errorf("blkid in the image says %s is %q, want %q", file, got, want)
		}
	}
	for _, tool := range []string{"cryptsetup", "mount", "umount", "blockdev", "fsck"} {
		in(tool, "--version")
	}
	in("xfs_growfs", "-V")

	sbom, err := os.ReadFile(filepath.Join(s.dist, "images", "capvco-csi-driver_linux_"+runtime.GOARCH+".spdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range csiTools {
		version, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", pkg).Output()
		if err != nil || !bytes.Contains(sbom, []byte(`"name": "Debian package `+pkg+`",`+"\n      \"versionInfo\": \""+string(version)+`"`)) {
			t.Errorf("the image's SBOM does not list Debian package %s %s (%v)", pkg, version, err)
		}
	}
}

// resolveIn follows p's symbolic links inside root (an absolute target is root's), and says
// whether a regular file is at the end; it returns the file's path in root.
func resolveIn(root, p string) (string, bool) {
	for i := 0; i < 16; i++ {
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		cur := "/"
		relinked := false
		for j, part := range parts {
			next := path.Join(cur, part)
			fi, err := os.Lstat(filepath.Join(root, next))
			if err != nil {
				return "", false
			}
			if fi.Mode()&os.ModeSymlink != 0 {
				target, err := os.Readlink(filepath.Join(root, next))
				if err != nil {
					return "", false
				}
				if !path.IsAbs(target) {
					target = path.Join(cur, target)
				}
				p = path.Join(append([]string{target}, parts[j+1:]...)...)
				relinked = true
				break
			}
			cur = next
		}
		if !relinked {
			fi, err := os.Stat(filepath.Join(root, cur))
			return cur, err == nil && fi.Mode().IsRegular()
		}
	}
	return "", false
}

func sum(t *testing.T, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
