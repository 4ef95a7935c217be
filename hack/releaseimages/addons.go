package main

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/capx-io/capx/hack/dist"
	"github.com/capx-io/capx/test/images"
)

// The add-on images: what the manager installs into every workload cluster runs the project's
// images <repository>/<component>:<manager version> (internal/capvco/addons), so the release
// ships one image per add-on component of the project, for every architecture of the manager,
// its binaries built with the manager's build flags (the version stamp is goreleaser's too, for
// a binary that links internal/version).

// addonImage is one add-on component's image.
type addonImage struct {
	name string
	// binaries are the main packages put at /<last path element>; the first is the entrypoint.
	binaries []string
	// user runs the image unless its Pod says otherwise.
	user        string
	description string
	// tools are Debian programs the image runs by name (on PATH), with configs their files.
	tools   []debTool
	configs map[string]string
}

const module = "github.com/capx-io/capx"

// addonImages are the add-on components of internal/capvco/addons built from cmd/ (checked by
// checkAddonImages against addons.Components and cmd/).
var addonImages = []addonImage{
	{name: "capvco-cloud-controller-manager", binaries: []string{module + "/cmd/capvco-cloud-controller-manager"}, user: images.NonRootUser,
		description: "CAPVCO cloud controller manager: nodes' addresses and provider IDs, load balancers on whitesky.cloud"},
	// The node plugin formats, mounts and encrypts volumes: its DaemonSet runs it privileged as
	// the image's user, root; the controller's Deployment runs it as 65532.
	{name: "capvco-csi-driver", binaries: []string{module + "/cmd/capvco-csi-driver"}, user: "0:0",
		description: "CAPVCO CSI driver (controller and node plugin) for whitesky.cloud disks, with Debian's mount, e2fsprogs, xfsprogs and cryptsetup",
		tools:       csiTools, configs: csiConfigFiles},
	{name: "capvco-external-dns-webhook", binaries: []string{module + "/cmd/capvco-external-dns-webhook"}, user: images.NonRootUser,
		description: "external-dns webhook provider for whitesky.cloud DNS records"},
	// The agent installs the CNI plugin from its image onto the node (--install-cni-plugin).
	{name: "capvco-sriov-agent", binaries: []string{module + "/cmd/capvco-sriov-agent", module + "/cmd/capvco-sriov"}, user: images.NonRootUser,
		description: "CAPVCO SR-IOV agent and its CNI plugin (/capvco-sriov)"},
}

// checkAddonImages refuses a release whose add-on images are not exactly the add-on components
// the project builds (dist.AddonComponents): a component the manager names without its image
// would fail in every workload cluster.
func checkAddonImages(repo string, imgs []addonImage) error {
	want := dist.AddonComponents(repo)
	var have []string
	for _, img := range imgs {
		have = append(have, img.name)
	}
	slices.Sort(have)
	if !slices.Equal(want, have) {
		return fmt.Errorf("the manager delivers the add-on components %s and the release would build images for %s: list each in hack/releaseimages' addonImages",
			strings.Join(want, ", "), strings.Join(have, ", "))
	}
	return nil
}

// releaseLdflags are the -ldflags goreleaser.yaml builds the release's binaries with (the
// version stamp internal/version reads: v{{ .Version }}, {{ .ShortCommit }}, {{ .CommitDate }}),
// for the release's version, commit and commit date. goreleaser's -trimpath keeps them out of
// a binary's build information, so they are rendered here the way goreleaser does.
func releaseLdflags(version, revision, date string) (string, error) {
	out, err := exec.Command("git", "rev-parse", "--short", revision).Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse --short %s (goreleaser's ShortCommit): %w", revision, err)
	}
	v := module + "/internal/version."
	return fmt.Sprintf("-s -w -X %sversion=%s -X %scommit=%s -X %sdate=%s", v, version, v, strings.TrimSpace(string(out)), v, date), nil
}

// buildAddons builds every add-on binary for one architecture, static and with the manager's
// flags (goreleaser.yaml: CGO_ENABLED=0, -trimpath, the ldflags), in one go command, into dir.
func buildAddons(dir, arch, ldflags string, imgs []addonImage) error {
	var pkgs []string
	for _, img := range imgs {
		pkgs = append(pkgs, img.binaries...)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cmd := exec.Command("go", append([]string{"build", "-trimpath", "-ldflags=" + ldflags, "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build of the add-ons for linux/%s: %w: %s", arch, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// addonSpec is one add-on image's platform: its binaries from binDir, and its Debian tools from
// the root holding that architecture's packages.
func addonSpec(img addonImage, arch, binDir, debianRoot string, base []images.File, labels map[string]string) (images.Spec, []debPackage, error) {
	files := append([]images.File{}, base...)
	var entrypoint string
	for _, pkg := range img.binaries {
		name := filepath.Base(pkg)
		files = append(files, images.File{Path: "/" + name, Source: filepath.Join(binDir, name), Mode: 0o755})
		if entrypoint == "" {
			entrypoint = "/" + name
		}
	}
	spec := images.Spec{Entrypoint: []string{entrypoint}, User: img.user, Architecture: arch, Labels: labels}
	if len(img.tools) == 0 {
		spec.Files = files
		return spec, nil, nil
	}
	if debianRoot == "" {
		return images.Spec{}, nil, fmt.Errorf("%s for linux/%s needs Debian's %s packages for %s: give -debian-root %s=DIR (hack/releaseimages/debian-root.sh %s DIR makes one)",
			img.name, arch, toolPackages(img.tools), arch, arch, arch)
	}
	deb, err := collectDebian(debianRoot, arch, img.tools, img.configs)
	if err != nil {
		return images.Spec{}, nil, fmt.Errorf("%s for linux/%s: %w", img.name, arch, err)
	}
	spec.Files = append(files, deb.files...)
	// resize2fs and e2fsck refuse to run without a mount table (k8s.io/mount-utils' resize).
	spec.Files = append(spec.Files, images.File{Path: "/etc/mtab", Symlink: "../proc/self/mounts"})
	// Debian's tools and libraries are GPL and LGPL (each package's copyright file is in the image).
	spec.Labels["org.opencontainers.image.licenses"] = "Apache-2.0 AND MPL-2.0 AND GPL-2.0-or-later AND LGPL-2.1-or-later"
	spec.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return spec, deb.pkgs, nil
}

func toolPackages(tools []debTool) string {
	var pkgs []string
	for _, t := range tools {
		if !slices.Contains(pkgs, t.pkg) {
			pkgs = append(pkgs, t.pkg)
		}
	}
	return strings.Join(pkgs, ", ")
}

// addonShipped is what an add-on image's SBOM lists beyond the base: each binary with the Go
// modules built into it, and each Debian package with its source package.
func addonShipped(img addonImage, version, binDir string, pkgs []debPackage) ([]shipped, error) {
	var out []shipped
	for _, pkg := range img.binaries {
		name := filepath.Base(pkg)
		info, err := buildinfo.ReadFile(filepath.Join(binDir, name))
		if err != nil {
			return nil, err
		}
		out = append(out, shipped{name, version, "Apache-2.0", "https://github.com/capx-io/capx",
			"/" + name + ", built from " + info.Path + " with " + info.GoVersion})
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			out = append(out, shipped{d.Path, d.Version, "NOASSERTION", "https://pkg.go.dev/" + d.Path + "@" + d.Version,
				"Go module in /" + name + " (go.sum " + d.Sum + ")"})
		}
	}
	for _, p := range pkgs {
		out = append(out, shipped{"Debian package " + p.name, p.version, "NOASSERTION", "https://tracker.debian.org/pkg/" + p.source,
			"Debian " + p.arch + " binary package of the source package " + p.source + " " + p.sourceVersion + "; licences in /usr/share/doc/" + p.name + "/copyright"})
	}
	return out, nil
}
