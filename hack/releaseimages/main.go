// Command releaseimages builds the release's container images from a goreleaser dist folder,
// without a container engine or a registry (test/images, go-containerregistry), as OCI image
// layouts and, beside each, the same layout as one tar file (`ctr images import --all-platforms`
// loads it; `crane push` or `skopeo copy oci:` publish it):
//
//   - capx-manager: the static manager (controllers of both providers, and the CAPTF Job runner
//     as `manager runner`), for every linux architecture goreleaser built it for.
//   - captf-module-base: the base image for CAPTF module authors: OpenTofu at /captf/runtime
//     (the toolchain's static tofu, for the architectures it exists for), an empty
//     /captf/module for the module's files, user 65532, the contract labels.
//
// Both carry the OCI labels source, version, revision, licenses, title and description.
//
//	go run ./hack/releaseimages [-dist dist] [-o dist/images] [-registry ghcr.io/capx-io] \
//	    [-tofu bin/tofu] [-tofu-version v1.12.6] [-revision COMMIT]
package main

import (
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/capx-io/capx/hack/dist"
	"github.com/capx-io/capx/test/images"
)

func main() {
	distDir := flag.String("dist", "dist", "goreleaser's dist folder")
	out := flag.String("o", filepath.Join("dist", "images"), "folder for the layouts and tarballs")
	registry := flag.String("registry", "ghcr.io/capx-io", "registry and organisation the images are named under")
	tofu := flag.String("tofu", filepath.Join("bin", "tofu"), "static OpenTofu binary for the module base image")
	tofuVersion := flag.String("tofu-version", "", "OpenTofu version, for the io.captf.runtime.version label")
	revision := flag.String("revision", "", "full commit the images are built from")
	flag.Parse()
	version, err := dist.Version(*distDir)
	if err != nil {
		fail(err)
	}
	labels := func(title, description string) map[string]string {
		return map[string]string{
			"org.opencontainers.image.source":      "https://github.com/capx-io/capx",
			"org.opencontainers.image.version":     version,
			"org.opencontainers.image.revision":    *revision,
			"org.opencontainers.image.licenses":    "Apache-2.0",
			"org.opencontainers.image.title":       title,
			"org.opencontainers.image.description": description,
		}
	}

	managers, err := linuxBinaries(*distDir, "manager")
	if err != nil {
		fail(err)
	}
	var specs []images.Spec
	for _, arch := range sortedKeys(managers) {
		specs = append(specs, images.Spec{
			Files:        []images.File{{Path: "/manager", Source: managers[arch], Mode: 0o755}},
			Entrypoint:   []string{"/manager"},
			User:         images.NonRootUser,
			Architecture: arch,
			Labels: labels("capx-manager",
				"Controller manager of the CAPTF and CAPVCO Cluster API providers; `manager runner` is the CAPTF Job runner"),
		})
	}
	if err := write(*out, *registry+"/capx-manager:"+version, "capx-manager", specs); err != nil {
		fail(err)
	}

	arch, err := elfArch(*tofu)
	if err != nil {
		fail(fmt.Errorf("module base image: %w (hack/toolchain.sh tofu builds it)", err))
	}
	empty, err := os.MkdirTemp("", "captf-module-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(empty)
	base := images.TofuModule{
		ModuleDir:      empty,
		Runtime:        *tofu,
		RuntimeVersion: *tofuVersion,
		Labels: labels("captf-module-base",
			"Base image for CAPTF module images (contract v1alpha1): OpenTofu at /captf/runtime; copy the module to /captf/module"),
	}
	spec, err := base.Spec()
	if err != nil {
		fail(err)
	}
	spec.Architecture = arch
	if err := write(*out, *registry+"/captf-module-base:"+version, "captf-module-base", []images.Spec{spec}); err != nil {
		fail(err)
	}
}

func write(out, ref, name string, specs []images.Spec) error {
	dir := filepath.Join(out, name)
	if err := images.WriteLayout(dir, ref, specs...); err != nil {
		return err
	}
	if err := images.TarDir(dir, dir+".oci.tar"); err != nil {
		return err
	}
	var archs []string
	for _, s := range specs {
		archs = append(archs, "linux/"+s.Architecture)
	}
	fmt.Fprintf(os.Stderr, "releaseimages: %s (%s) in %s and %s.oci.tar\n", ref, strings.Join(archs, ", "), dir, dir)
	return nil
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

func sortedKeys(m map[string]string) []string {
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
