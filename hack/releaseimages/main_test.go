package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// fakeELF is the smallest linux executable header debug/elf reads: enough for elfArch, and
// different per architecture, so each platform's image can be told apart.
func fakeELF(machine elf.Machine) []byte {
	var b bytes.Buffer
	b.Write([]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)})
	b.Write(make([]byte, 9))
	for _, v := range []any{uint16(elf.ET_EXEC), uint16(machine), uint32(elf.EV_CURRENT), uint64(0), uint64(0), uint64(0),
		uint32(0), uint16(64), uint16(56), uint16(0), uint16(64), uint16(0), uint16(0)} {
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	return b.Bytes()
}

// TestBothArchitectures builds the images from a dist folder with linux/amd64 and linux/arm64
// managers and a tofu for each architecture: each image is an index of both platforms, each
// platform holds its own binaries, and both carry the base content and the licence notices.
func TestBothArchitectures(t *testing.T) {
	dir := t.TempDir()
	distDir := filepath.Join(dir, "dist")
	write := func(p string, b []byte) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bins := map[string][]byte{"amd64": fakeELF(elf.EM_X86_64), "arm64": fakeELF(elf.EM_AARCH64)}
	var artifacts []map[string]any
	var tofus []string
	for arch, b := range bins {
		p := write(filepath.Join(distDir, "manager_linux_"+arch, "manager"), append(append([]byte{}, b...), []byte("manager-"+arch)...))
		artifacts = append(artifacts, map[string]any{"name": "manager", "path": p, "goos": "linux", "goarch": arch, "type": "Binary",
			"extra": map[string]any{"ID": "manager"}})
		tofus = append(tofus, write(filepath.Join(dir, "tofu-"+arch), append(append([]byte{}, b...), []byte("tofu-"+arch)...)))
	}
	a, _ := json.Marshal(artifacts)
	write(filepath.Join(distDir, "artifacts.json"), a)
	write(filepath.Join(distDir, "metadata.json"), []byte(`{"version":"0.3.0-test"}`))
	c := config{
		dist: distDir, out: filepath.Join(dir, "images"), registry: "registry.example/capx", tofus: tofus, tofuVersion: "v1.12.6",
		tofuLicense: write(filepath.Join(dir, "MPL"), []byte("Mozilla Public License Version 2.0\n")),
		license:     write(filepath.Join(dir, "LICENSE"), []byte("Apache License\n")), revision: "abc123",
		date: "2026-11-30T10:00:00Z",
	}
	if err := run(c); err != nil {
		t.Fatal(err)
	}
	var listed []Image
	b, err := os.ReadFile(filepath.Join(c.out, "images.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &listed); err != nil || len(listed) != 2 {
		t.Fatalf("images.json: %s (%v)", b, err)
	}
	for _, img := range listed {
		if strings.Join(img.Platforms, ",") != "linux/amd64,linux/arm64" {
			t.Errorf("%s: platforms %v", img.Name, img.Platforms)
		}
		name := strings.TrimSuffix(img.Layout, "/")
		p, err := layout.FromPath(filepath.Join(c.out, img.Layout))
		if err != nil {
			t.Fatal(err)
		}
		top, _ := p.ImageIndex()
		tm, _ := top.IndexManifest()
		if tm.Manifests[0].Digest.String() != img.Digest {
			t.Errorf("%s: images.json digest %s, layout %s", name, img.Digest, tm.Manifests[0].Digest)
		}
		idx, err := top.ImageIndex(tm.Manifests[0].Digest)
		if err != nil {
			t.Fatal(err)
		}
		im, _ := idx.IndexManifest()
		for _, d := range im.Manifests {
			arch := d.Platform.Architecture
			i, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, _ := i.ConfigFile()
			if cf.Architecture != arch || cf.Config.Labels["org.opencontainers.image.licenses"] != "Apache-2.0 AND MPL-2.0" {
				t.Errorf("%s %s: config arch %s, labels %v", name, arch, cf.Architecture, cf.Config.Labels)
			}
			files := contents(t, i)
			bin, want := "manager", "manager-"+arch
			if name == "captf-module-base" {
				bin, want = "captf/runtime", "tofu-"+arch
				if !strings.Contains(string(files["usr/share/doc/opentofu/LICENSE"].data), "Mozilla Public License") ||
					!strings.Contains(string(files["usr/share/doc/opentofu/NOTICE"].data), "https://github.com/opentofu/opentofu/tree/v1.12.6") {
					t.Errorf("%s %s: no OpenTofu licence notice", name, arch)
				}
			}
			if !bytes.HasSuffix(files[bin].data, []byte(want)) {
				t.Errorf("%s %s: /%s is not the %s binary", name, arch, bin, arch)
			}
			checkBase(t, name+" "+arch, files)
			checkSBOM(t, filepath.Join(c.out, name+"_linux_"+arch+".spdx.json"), img.Name, d.Digest.Hex, name)
		}
	}
}

// checkSBOM: the image's document names it and its digest, and lists what it ships with
// versions and licences.
func checkSBOM(t *testing.T, path, ref, digest, name string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc spdxDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	img := doc.Packages[0]
	if doc.CreationInfo.Created != "2026-11-30T10:00:00Z" || img.Name != ref || img.Checksums[0].Value != digest || !strings.Contains(img.SourceInfo, "abc123") {
		t.Errorf("%s: document %+v", path, doc)
	}
	want := map[string]string{"Mozilla NSS root certificates": "MPL-2.0", "time zone database": "NOASSERTION", "manager": "Apache-2.0"}
	if name == "captf-module-base" {
		want = map[string]string{"Mozilla NSS root certificates": "MPL-2.0", "OpenTofu": "MPL-2.0"}
	}
	for prefix, license := range want {
		found := false
		for _, p := range doc.Packages[1:] {
			if strings.HasPrefix(p.Name, prefix) && p.LicenseDeclared == license && p.VersionInfo != "" {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no %s (%s) with a version among %+v", path, prefix, license, doc.Packages)
		}
	}
	if len(doc.Relationships) != len(doc.Packages) {
		t.Errorf("%s: %d relationships for %d packages", path, len(doc.Relationships), len(doc.Packages))
	}
}

type entry struct {
	h    *tar.Header
	data []byte
}

func contents(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[strings.TrimSuffix(h.Name, "/")] = entry{h, b}
	}
}

// checkBase: what a static binary running as nonroot expects of its root file system.
func checkBase(t *testing.T, what string, files map[string]entry) {
	t.Helper()
	if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:") || !strings.Contains(string(files["etc/group"].data), "nonroot:x:65532:") {
		t.Errorf("%s: no nonroot user or group", what)
	}
	if tmp := files["tmp"].h; tmp == nil || tmp.Typeflag != tar.TypeDir || tmp.Mode != 0o1777 {
		t.Errorf("%s: /tmp is %+v, want a directory with mode 1777", what, tmp)
	}
	if home := files["home/nonroot"].h; home == nil || home.Uid != 65532 || home.Mode != 0o700 {
		t.Errorf("%s: /home/nonroot is %+v, want the nonroot user's, 0700", what, home)
	}
	pool, n := x509.NewCertPool(), 0
	for rest := files["etc/ssl/certs/ca-certificates.crt"].data; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatalf("%s: CA bundle: %v", what, err)
		}
		pool.AddCert(c)
		n++
	}
	if n < 100 {
		t.Errorf("%s: the CA bundle holds %d certificates, want Mozilla's (over 100)", what, n)
	}
	if _, err := time.LoadLocationFromTZData("Europe/Amsterdam", files["usr/share/zoneinfo/Europe/Amsterdam"].data); err != nil {
		t.Errorf("%s: time zone database: %v", what, err)
	}
	for _, notice := range []string{"usr/share/doc/capx/LICENSE", "usr/share/doc/ca-certificates/NOTICE"} {
		if len(files[notice].data) == 0 {
			t.Errorf("%s: no %s", what, notice)
		}
	}
}

// TestModuleBaseCoversTheManagersArchitectures: the module base image is built for exactly the
// architectures of the manager, or not at all.
func TestModuleBaseCoversTheManagersArchitectures(t *testing.T) {
	for _, c := range []struct {
		manager, base []string
		ok            bool
	}{
		{[]string{"amd64", "arm64"}, []string{"amd64", "arm64"}, true},
		{[]string{"amd64"}, []string{"amd64"}, true},
		{[]string{"amd64", "arm64"}, []string{"amd64"}, false},
		{[]string{"amd64"}, []string{"arm64"}, false},
		{[]string{"amd64"}, []string{"amd64", "arm64"}, false},
	} {
		err := sameArchitectures(c.manager, c.base)
		if (err == nil) != c.ok {
			t.Errorf("manager %v, base %v: %v, want ok=%v", c.manager, c.base, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "bin/tofu-arm64") {
			t.Errorf("the refusal does not say what to pass: %v", err)
		}
	}
}
