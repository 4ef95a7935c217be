// Command releaseimages builds the release's container images from a goreleaser dist folder,
// without a container engine or a registry (test/images, go-containerregistry), as OCI image
// layouts and, beside each, the same layout as one tar file (`ctr images import --all-platforms`
// loads it) and an SPDX document per platform (sbom.go):
//
//   - capx-manager: the static manager (controllers of both providers, and the CAPTF Job runner
//     as `manager runner`), for every linux architecture goreleaser built it for.
//   - captf-module-base: the base image for CAPTF module authors: OpenTofu at /captf/runtime
//     (the toolchain's static tofu, one image per architecture given with -tofu), an empty
//     /captf/module for the module's files, the contract labels.
//   - the add-ons the manager installs into workload clusters (addons.go), one image per
//     component, for the manager's architectures, built here with goreleaser's flags and the
//     release's version stamp: capvco-cloud-controller-manager, capvco-csi-driver (with
//     Debian's mount, util-linux, e2fsprogs, xfsprogs and cryptsetup tools and their libraries,
//     debian.go, from the -debian-root of each architecture), capvco-external-dns-webhook,
//     capvco-sriov-agent (with its CNI plugin). A component of internal/capvco/addons built
//     from cmd/ without an entry here is refused.
//
// All are built on test/images.BaseContent (users root and nonroot, a CA bundle, the time
// zone database, /tmp), run as 65532 (the CSI driver as root: its node plugin mounts), and carry
// the licence notices of what they ship under /usr/share/doc and the OCI labels source, version,
// revision, licenses, title and description. images.json in the output folder lists each
// image's name, index digest and platforms.
//
//	go run ./hack/releaseimages [-dist dist] [-o dist/images] [-registry ghcr.io/capx-io] \
//	    -tofu bin/tofu[,bin/tofu-arm64] -tofu-version v1.12.6 -revision COMMIT -date RFC3339 \
//	    [-debian-root arm64=_artifacts/release/debian-arm64]
package main

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/capx-io/capx/hack/dist"
	"github.com/capx-io/capx/test/images"
)

// config is what one run builds from.
type config struct {
	dist, out, registry string
	addons              []addonImage
	// debianRoots are, by GOARCH, the root file systems the add-ons' Debian tools come from.
	debianRoots    map[string]string
	tofus          []string // static tofu binaries, one per architecture
	tofuVersion    string
	tofuLicense    string // OpenTofu's LICENSE (MPL-2.0)
	license        string // this project's LICENSE
	revision, date string // the commit and its date, for the labels and the SBOMs
}

func main() {
	var c config
	flag.StringVar(&c.dist, "dist", "dist", "goreleaser's dist folder")
	flag.StringVar(&c.out, "o", filepath.Join("dist", "images"), "folder for the layouts, tarballs and images.json")
	flag.StringVar(&c.registry, "registry", "ghcr.io/capx-io", "registry and organisation the images are named under")
	tofu := flag.String("tofu", filepath.Join("bin", "tofu"), "static OpenTofu binaries for the module base image, comma-separated, one per architecture")
	flag.StringVar(&c.tofuVersion, "tofu-version", "", "OpenTofu version, for the io.captf.runtime.version label and the licence notice")
	flag.StringVar(&c.tofuLicense, "tofu-license", "", "OpenTofu's LICENSE file (default: from the Go module cache, github.com/opentofu/opentofu@<tofu-version>)")
	flag.StringVar(&c.license, "license", "LICENSE", "this project's licence")
	flag.StringVar(&c.revision, "revision", "", "full commit the images are built from")
	flag.StringVar(&c.date, "date", "", "that commit's date, RFC 3339 (the SBOMs' creation time)")
	roots := flag.String("debian-root", "", "ARCH=DIR,...: the Debian root file system (with its dpkg database) each architecture's add-on tools come from; default: / for this machine's (hack/install-deps.sh installs them), hack/releaseimages/debian-root.sh makes one for another")
	flag.Parse()
	c.addons = addonImages
	if err := checkAddonImages(".", c.addons); err != nil {
		fail(err)
	}
	var err error
	if c.debianRoots, err = parseRoots(*roots); err != nil {
		fail(err)
	}
	if c.revision == "" || c.date == "" {
		fail(fmt.Errorf("-revision and -date are required (the Makefile passes the commit and its date)"))
	}
	c.tofus = strings.Split(*tofu, ",")
	if c.tofuVersion == "" {
		fail(fmt.Errorf("-tofu-version is required (hack/versions.env's OPENTOFU_VERSION)"))
	}
	if c.tofuLicense == "" {
		dir, err := moduleDir("github.com/opentofu/opentofu@" + c.tofuVersion)
		if err != nil {
			fail(err)
		}
		c.tofuLicense = filepath.Join(dir, "LICENSE")
	}
	if err := run(c); err != nil {
		fail(err)
	}
}

// Image is one entry of images.json.
type Image struct {
	Name string `json:"name"` // repository:tag
	// Digest is the image index's; every platform's image is listed in it.
	Digest    string   `json:"digest"`
	Platforms []string `json:"platforms"`
	// Layout is the OCI layout folder, relative to images.json.
	Layout string `json:"layout"`
}

func run(c config) error {
	version, err := dist.Version(c.dist)
	if err != nil {
		return err
	}
	license, err := os.ReadFile(c.license)
	if err != nil {
		return fmt.Errorf("the project's licence: %w", err)
	}
	tofuLicense, err := os.ReadFile(c.tofuLicense)
	if err != nil {
		return fmt.Errorf("OpenTofu's licence (MPL-2.0, shipped beside its binary): %w", err)
	}
	base, err := images.BaseContent()
	if err != nil {
		return err
	}
	base = append(base, images.File{Path: "/usr/share/doc/capx/LICENSE", Data: license})
	labels := func(title, description string) map[string]string {
		return map[string]string{
			"org.opencontainers.image.source":   "https://github.com/capx-io/capx",
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": c.revision,
			// The project's code, and the CA bundle's data (Mozilla's, MPL-2.0); the module base
			// image's OpenTofu is MPL-2.0 too.
			"org.opencontainers.image.licenses":    "Apache-2.0 AND MPL-2.0",
			"org.opencontainers.image.title":       title,
			"org.opencontainers.image.description": description,
		}
	}

	managers, err := linuxBinaries(c.dist, "manager")
	if err != nil {
		return err
	}
	var managerSpecs []images.Spec
	for _, arch := range sortedKeys(managers) {
		managerSpecs = append(managerSpecs, images.Spec{
			Files:        append(append([]images.File{}, base...), images.File{Path: "/manager", Source: managers[arch], Mode: 0o755}),
			Entrypoint:   []string{"/manager"},
			User:         images.NonRootUser,
			Architecture: arch,
			Labels: labels("capx-manager",
				"Controller manager of the CAPTF and CAPVCO Cluster API providers; `manager runner` is the CAPTF Job runner"),
		})
	}

	empty, err := os.MkdirTemp("", "captf-module-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(empty)
	tofuNotice := fmt.Sprintf("/captf/runtime is OpenTofu %[1]s (https://opentofu.org), under the Mozilla Public License 2.0\n"+
		"(LICENSE beside this file). Its source: https://github.com/opentofu/opentofu/tree/%[1]s, built unchanged\n"+
		"from the Go module github.com/opentofu/opentofu@%[1]s by hack/toolchain.sh of https://github.com/capx-io/capx.\n", c.tofuVersion)
	var baseSpecs []images.Spec
	seen := map[string]string{}
	for _, tofu := range c.tofus {
		arch, err := elfArch(tofu)
		if err != nil {
			return fmt.Errorf("module base image: %w (hack/toolchain.sh tofu builds it)", err)
		}
		if prev, dup := seen[arch]; dup {
			return fmt.Errorf("module base image: %s and %s are both linux/%s", prev, tofu, arch)
		}
		seen[arch] = tofu
		m := images.TofuModule{
			ModuleDir:      empty,
			Runtime:        tofu,
			RuntimeVersion: c.tofuVersion,
			Labels: labels("captf-module-base",
				"Base image for CAPTF module images (contract v1alpha1): OpenTofu at /captf/runtime; copy the module to /captf/module"),
			ExtraFiles: append(append([]images.File{}, base...),
				images.File{Path: "/usr/share/doc/opentofu/LICENSE", Data: tofuLicense},
				images.File{Path: "/usr/share/doc/opentofu/NOTICE", Data: []byte(tofuNotice)}),
		}
		spec, err := m.Spec()
		if err != nil {
			return err
		}
		spec.Architecture = arch
		baseSpecs = append(baseSpecs, spec)
	}
	sort.Slice(baseSpecs, func(i, j int) bool { return baseSpecs[i].Architecture < baseSpecs[j].Architecture })
	if err := sameArchitectures(sortedKeys(managers), sortedKeys(seen)); err != nil {
		return err
	}

	type release struct {
		name     string
		specs    []images.Spec
		contents func(arch string) []shipped
	}
	all := []release{
		{"capx-manager", managerSpecs, func(arch string) []shipped {
			return append([]shipped{{"manager", version, "Apache-2.0", "https://github.com/capx-io/capx",
				"/manager; its Go modules: manager_" + version + "_linux_" + arch + ".spdx.json of the release"}}, baseShipped(version)...)
		}},
		{"captf-module-base", baseSpecs, func(string) []shipped {
			return append([]shipped{{"OpenTofu (/captf/runtime)", c.tofuVersion, "MPL-2.0", "https://github.com/opentofu/opentofu/tree/" + c.tofuVersion,
				"built unchanged from the Go module github.com/opentofu/opentofu@" + c.tofuVersion}}, baseShipped(version)...)
		}},
	}

	// The add-ons, for the manager's architectures, with its build flags.
	if len(c.addons) > 0 {
		bins, err := os.MkdirTemp("", "capx-addons-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(bins)
		specs := map[string][]images.Spec{}
		contents := map[string]map[string][]shipped{}
		ldflags, err := releaseLdflags(version, c.revision, c.date)
		if err != nil {
			return err
		}
		for _, arch := range sortedKeys(managers) {
			dir := filepath.Join(bins, arch)
			if err := buildAddons(dir, arch, ldflags, c.addons); err != nil {
				return err
			}
			for _, img := range c.addons {
				spec, pkgs, err := addonSpec(img, arch, dir, c.debianRoots[arch], base, labels(img.name, img.description))
				if err != nil {
					return err
				}
				items, err := addonShipped(img, version, dir, pkgs)
				if err != nil {
					return err
				}
				specs[img.name] = append(specs[img.name], spec)
				if contents[img.name] == nil {
					contents[img.name] = map[string][]shipped{}
				}
				contents[img.name][arch] = append(items, baseShipped(version)...)
			}
		}
		for _, img := range c.addons {
			byArch := contents[img.name]
			all = append(all, release{img.name, specs[img.name], func(arch string) []shipped { return byArch[arch] }})
		}
	}

	var built []Image
	for _, img := range all {
		b, err := write(c.out, c.registry+"/"+img.name+":"+version, img.name, img.specs)
		if err != nil {
			return err
		}
		built = append(built, b)
		if err := writeSBOMs(c.out, img.name, c.registry+"/"+img.name+":"+version, version, c.revision, c.date, img.contents); err != nil {
			return err
		}
	}
	j, err := json.MarshalIndent(built, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.out, "images.json"), append(j, '\n'), 0o644)
}

func write(out, ref, name string, specs []images.Spec) (Image, error) {
	dir := filepath.Join(out, name)
	if err := images.WriteLayout(dir, ref, specs...); err != nil {
		return Image{}, err
	}
	if err := images.TarDir(dir, dir+".oci.tar"); err != nil {
		return Image{}, err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return Image{}, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return Image{}, err
	}
	m, err := top.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		return Image{}, fmt.Errorf("%s: want one image index in index.json (%v)", dir, err)
	}
	img := Image{Name: ref, Digest: m.Manifests[0].Digest.String(), Layout: name}
	for _, s := range specs {
		img.Platforms = append(img.Platforms, "linux/"+s.Architecture)
	}
	fmt.Fprintf(os.Stderr, "releaseimages: %s@%s (%s) in %s and %s.oci.tar\n", ref, img.Digest, strings.Join(img.Platforms, ", "), dir, dir)
	return img, nil
}

// sameArchitectures refuses a module base image for fewer or other architectures than the
// manager's: a module author's image built FROM it would not run where the manager's runner Jobs
// do (the release built the base for amd64 only while the manager was multi-arch).
func sameArchitectures(manager, base []string) error {
	if strings.Join(manager, ",") == strings.Join(base, ",") {
		return nil
	}
	return fmt.Errorf("the manager is built for linux/%s and the module base image's OpenTofu for linux/%s: "+
		"give -tofu one static tofu per manager architecture (make release-snapshot passes bin/tofu and bin/tofu-arm64, which hack/toolchain.sh tofu-arm64 builds)",
		strings.Join(manager, ", linux/"), strings.Join(base, ", linux/"))
}

// linuxBinaries finds a build's linux binaries in goreleaser's artifact list, by GOARCH.
func linuxBinaries(distDir, id string) (map[string]string, error) {
	all, err := dist.Artifacts(distDir)
	if err != nil {
		return nil, err
	}
	bins := map[string]string{}
	for _, a := range dist.Filter(all, dist.Binary, id) {
		if a.Goos == "linux" {
			bins[a.Goarch] = a.Path
		}
	}
	if len(bins) == 0 {
		return nil, fmt.Errorf("%s/artifacts.json lists no linux binary of %s", distDir, id)
	}
	return bins, nil
}

// elfArch is the GOARCH of a linux executable.
func elfArch(p string) (string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	}
	return "", fmt.Errorf("%s: unsupported machine %s", p, f.Machine)
}

// moduleDir is a module's folder in the module cache (downloaded if it is not there yet).
func moduleDir(module string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go mod download %s: %w: %s", module, err, strings.TrimSpace(stderr.String()+stdout.String()))
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(stdout.Bytes(), &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no folder (%v)", module, err)
	}
	return m.Dir, nil
}

// parseRoots reads -debian-root's ARCH=DIR entries; this machine's architecture defaults to /
// when it has a dpkg database.
func parseRoots(v string) (map[string]string, error) {
	roots := map[string]string{}
	if _, err := os.Stat("/var/lib/dpkg/status"); err == nil {
		roots[runtime.GOARCH] = "/"
	}
	for _, e := range strings.Split(v, ",") {
		if strings.TrimSpace(e) == "" {
			continue
		}
		arch, dir, ok := strings.Cut(e, "=")
		if !ok || arch == "" || dir == "" {
			return nil, fmt.Errorf("-debian-root %q: want ARCH=DIR", e)
		}
		roots[arch] = dir
	}
	return roots, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "releaseimages:", err)
	os.Exit(1)
}
