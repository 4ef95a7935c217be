package main

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestAddonImagesAreTheDeliveredComponents: the release builds an image for exactly the add-on
// components of the project the manager delivers, and refuses a table that misses one.
func TestAddonImagesAreTheDeliveredComponents(t *testing.T) {
	repo := filepath.Join("..", "..")
	if err := checkAddonImages(repo, addonImages); err != nil {
		t.Fatal(err)
	}
	for i := range addonImages {
		short := slices.Delete(slices.Clone(addonImages), i, i+1)
		err := checkAddonImages(repo, short)
		if err == nil || !strings.Contains(err.Error(), addonImages[i].name) {
			t.Errorf("without %s: %v, want a refusal naming it", addonImages[i].name, err)
		}
	}
	for _, img := range addonImages {
		if _, err := os.Stat(filepath.Join(repo, "cmd", filepath.Base(img.binaries[0]), "main.go")); err != nil || img.binaries[0] != module+"/cmd/"+img.name {
			t.Errorf("%s: entrypoint %s is not its cmd/ binary (%v)", img.name, img.binaries[0], err)
		}
	}
}

// TestAddonImageWithDebianTools builds an add-on image for this machine's architecture from a
// real manager binary and this machine's Debian packages: the binary carries the manager's
// -ldflags, the tools are where PATH finds them with every library the loader needs, and the
// SBOM names each Debian package with its version.
func TestAddonImageWithDebianTools(t *testing.T) {
	dir := t.TempDir()
	distDir := filepath.Join(dir, "dist")
	manager := filepath.Join(distDir, "manager_linux_"+runtime.GOARCH, "manager")
	build := exec.Command("go", "build", "-trimpath", "-o", manager, module+"/test/images/pause")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	artifacts, _ := json.Marshal([]map[string]any{{"name": "manager", "path": manager, "goos": "linux", "goarch": runtime.GOARCH, "type": "Binary", "extra": map[string]any{"ID": "manager"}}})
	for p, b := range map[string][]byte{"artifacts.json": artifacts, "metadata.json": []byte(`{"version":"0.3.0-test"}`)} {
		if err := os.WriteFile(filepath.Join(distDir, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tofu := filepath.Join(dir, "tofu")
	if err := os.WriteFile(tofu, fakeELF(map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]), 0o755); err != nil {
		t.Fatal(err)
	}
	roots, err := parseRoots("")
	if err != nil || roots[runtime.GOARCH] != "/" {
		t.Fatalf("this machine's root: %v, %v (a Debian machine with hack/install-deps.sh's packages)", roots, err)
	}
	tools := []debTool{{"mkfs.ext4", "e2fsprogs"}, {"cryptsetup", "cryptsetup-bin"}, {"mount", "mount"}}
	c := config{
		dist: distDir, out: filepath.Join(dir, "images"), registry: "registry.example/capx", tofus: []string{tofu}, tofuVersion: "v1.12.6",
		tofuLicense: tofu, license: tofu, revision: head(t), date: "2026-11-30T10:00:00Z", debianRoots: roots,
		addons: []addonImage{{name: "x-tools", binaries: []string{module + "/test/images/pause"}, user: "0:0", tools: tools, configs: csiConfigFiles}},
	}
	if err := run(c); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(filepath.Join(c.out, "x-tools"))
	if err != nil {
		t.Fatal(err)
	}
	top, _ := p.ImageIndex()
	tm, _ := top.IndexManifest()
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != 1 || im.Manifests[0].Platform.Architecture != runtime.GOARCH {
		t.Fatalf("platforms %+v, want the manager's (linux/%s)", im.Manifests, runtime.GOARCH)
	}
	img, _ := idx.Image(im.Manifests[0].Digest)
	cf, _ := img.ConfigFile()
	if cf.Config.User != "0:0" || strings.Join(cf.Config.Entrypoint, " ") != "/pause" || !slices.Contains(cf.Config.Env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") {
		t.Errorf("config %+v", cf.Config)
	}
	files := contents(t, img)
	checkBase(t, "x-tools", files)
	bin := filepath.Join(dir, "pause")
	if err := os.WriteFile(bin, files["pause"].data, 0o755); err != nil {
		t.Fatal(err)
	}
	// Built as goreleaser builds the manager: static, -trimpath, the release's version stamp.
	info, err := buildinfo.ReadFile(bin)
	if err != nil || !slices.Contains(info.Settings, debug.BuildSetting{Key: "CGO_ENABLED", Value: "0"}) || !slices.Contains(info.Settings, debug.BuildSetting{Key: "-trimpath", Value: "true"}) {
		t.Errorf("/pause build settings: %v %v", info, err)
	}
	if want, err := releaseLdflags("v0.3.0-test", c.revision, c.date); err != nil || !strings.Contains(want, "version=v0.3.0-test -X") {
		t.Errorf("ldflags %q, %v", want, err)
	}
	for link, target := range map[string]string{"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64", "usr/sbin/mkfs.ext4": "/usr/sbin/mke2fs", "etc/mtab": "../proc/self/mounts"} {
		if h := files[link].h; h == nil || h.Linkname != target {
			t.Errorf("/%s: %+v, want a link to %s", link, h, target)
		}
	}
	for _, f := range []string{"usr/sbin/mke2fs", "usr/sbin/cryptsetup", "usr/bin/mount", "etc/mke2fs.conf", "usr/share/doc/e2fsprogs/copyright"} {
		if files[f].h == nil || len(files[f].data) == 0 {
			t.Errorf("/%s missing or empty", f)
		}
	}
	// Every library the loader needs is there: the image's own loader lists them from its files.
	interp, libs := elfInterp(t, files["usr/sbin/cryptsetup"].data), 0
	if files[strings.TrimPrefix(merged(interp), "/")].h == nil {
		t.Errorf("the loader %s is not in the image", interp)
	}
	for name := range files {
		if strings.Contains(name, ".so") {
			libs++
		}
	}
	if libs < 5 || files["usr/lib/"+map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]+"/libcryptsetup.so.12"].h == nil {
		t.Errorf("%d libraries, want libcryptsetup's closure", libs)
	}
	sbom, err := os.ReadFile(filepath.Join(c.out, "x-tools_linux_"+runtime.GOARCH+".spdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"e2fsprogs", "cryptsetup-bin", "mount", "libc6", "libcryptsetup12"} {
		version, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", pkg).Output()
		if err != nil || !bytes.Contains(sbom, []byte(`"name": "Debian package `+pkg+`",`+"\n      \"versionInfo\": \""+string(version)+`"`)) {
			t.Errorf("the SBOM does not list Debian package %s %s (%v)", pkg, version, err)
		}
	}
}

// elfInterp is an executable's dynamic loader (PT_INTERP).
func elfInterp(t *testing.T, b []byte) string {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			buf := make([]byte, p.Filesz)
			if _, err := p.ReadAt(buf, 0); err != nil {
				t.Fatal(err)
			}
			return strings.TrimRight(string(buf), "\x00")
		}
	}
	t.Fatal("no PT_INTERP")
	return ""
}

// head is this checkout's commit (the release's revision: releaseLdflags shortens it).
func head(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
