// Command crosscheck proves that every binary of the release builds for every platform
// goreleaser.yaml lists, faster than compiling them: CI builds the release artefacts for its own
// platform only (make release-snapshot RELEASE_PLATFORMS=host) and runs this for the others.
//
// For each build of goreleaser.yaml and each of its platforms except those given with -skip, it
// loads the main package and every package it depends on for that GOOS/GOARCH (CGO_ENABLED=0,
// the release's setting) and type-checks them all from source, as the compiler's front end
// does: a file missing for a platform, a symbol one platform's build tags leave out, a package
// that does not exist there, an import cycle or a type error fails it, naming the platform. It
// does not run the compiler's back end or the linker (a function declared in Go and written in
// assembly for some architectures only would pass): a release (RELEASE_PLATFORMS=all) compiles
// and links every platform. Loading the packages also downloads every module each platform
// needs, the windows-only ones included, so it doubles as the module prefetch.
//
//	go run ./hack/crosscheck [-config goreleaser.yaml] [-skip linux/amd64]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/tools/go/packages"
	"sigs.k8s.io/yaml"
)

type build struct {
	ID     string   `json:"id"`
	Main   string   `json:"main"`
	Goos   []string `json:"goos"`
	Goarch []string `json:"goarch"`
}

func main() {
	config := flag.String("config", "goreleaser.yaml", "goreleaser configuration whose builds are checked")
	skip := flag.String("skip", "", "platforms (os/arch, comma-separated) not to check, e.g. the one the artefacts were built for")
	flag.Parse()
	targets, err := readTargets(*config, strings.Split(*skip, ","))
	if err != nil {
		fail(err)
	}
	var errs []error
	for _, p := range sortedKeys(targets) {
		start := time.Now()
		n, err := check("", p, targets[p])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(os.Stderr, "crosscheck: %s: %s type-check (%d packages, %s)\n", p, strings.Join(targets[p], " "), n, time.Since(start).Round(time.Second))
	}
	if err := errors.Join(errs...); err != nil {
		fail(err)
	}
}

// readTargets maps each platform to the main packages built for it.
func readTargets(config string, skip []string) (map[string][]string, error) {
	b, err := os.ReadFile(config)
	if err != nil {
		return nil, err
	}
	var c struct {
		Builds []build `json:"builds"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", config, err)
	}
	skipped := map[string]bool{}
	for _, s := range skip {
		skipped[strings.TrimSpace(s)] = true
	}
	targets := map[string][]string{}
	for _, bd := range c.Builds {
		if bd.Main == "" || len(bd.Goos) == 0 || len(bd.Goarch) == 0 {
			return nil, fmt.Errorf("%s: build %q names no main package or platforms", config, bd.ID)
		}
		for _, goos := range bd.Goos {
			for _, goarch := range bd.Goarch {
				if p := goos + "/" + goarch; !skipped[p] {
					targets[p] = append(targets[p], bd.Main)
				}
			}
		}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("%s: no platform left to check", config)
	}
	return targets, nil
}

// check type-checks the main packages of the module in dir (empty: the working directory) and
// their dependencies for one platform and returns how many packages it checked.
func check(dir, platform string, mains []string) (int, error) {
	goos, goarch, _ := strings.Cut(platform, "/")
	cfg := &packages.Config{
		// Syntax with types and dependencies: every package is type-checked from source here,
		// none is compiled for export data.
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedImports | packages.NeedDeps | packages.NeedTypes | packages.NeedSyntax,
		Dir:  dir,
		Env:  append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0", "GOFLAGS=-mod=readonly -trimpath"),
	}
	pkgs, err := packages.Load(cfg, mains...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", platform, err)
	}
	var problems []string
	n := 0
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		n++
		for _, e := range p.Errors {
			problems = append(problems, "  "+e.Error())
		}
	})
	for _, p := range pkgs {
		if p.Name != "main" && len(p.Errors) == 0 {
			problems = append(problems, fmt.Sprintf("  %s is package %s, not a command", p.PkgPath, p.Name))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return n, fmt.Errorf("%s: %s does not build:\n%s", platform, strings.Join(mains, " "), strings.Join(problems, "\n"))
	}
	return n, nil
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "crosscheck:", err)
	os.Exit(1)
}
