// Command krewmanifests generates the krew Plugin manifests of the kubectl plugins from a
// goreleaser dist folder (dist/artifacts.json, the archives and checksums.txt).
//
// plugins/krew/<plugin>.yaml, committed, is the manifest template that krew-release-bot and this
// command render for a tag: every platform, archive, binary and file comes from the archives
// goreleaser built (read from inside each archive), and only the tag and the checksums are left
// as `{{ .TagName }}` and `{{ addURIAndSha ... }}`, since they change with every build. From the
// committed templates it renders dist/krew/<plugin>.yaml with the dist's version and the sha256
// of each archive, which `krew install --manifest --archive` installs.
//
//	go run ./hack/krewmanifests [-dist dist] [-index plugins/krew] BINARY...
//
// make verify-release fails when the committed templates differ from what the archives give. A
// kubectl-* BINARY without archives in dist is left out with a note.
package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/capx-io/capx/hack/dist"
)

const releaseURL = "https://github.com/capx-io/capx/releases/download/"

// plugins says what krew shows for each plugin.
var plugins = map[string]struct{ short, description string }{
	"captf": {
		short: "Operate CAPTF infrastructure",
		description: `kubectl captf is the command line of CAPTF, the Cluster API infrastructure
provider that runs OpenTofu modules as Kubernetes Jobs. It shows what CAPTF is
doing with a cluster's infrastructure and lets operators act on it within the
guards CAPTF enforces. Output is text, JSON or YAML; it never prompts without a
terminal.`,
	},
	"capvco": {
		short: "Operate CAPVCO on whitesky.cloud",
		description: `kubectl capvco is the command line of CAPVCO, the Cluster API infrastructure
provider for the whitesky.cloud platform: operator tools for the platform
resources its clusters use and for moving its clusters between management
clusters. Output is text, JSON or YAML; it never prompts without a terminal.`,
	},
}

// maxShort keeps the short description whole in `kubectl krew search`, which cuts it at 50
// characters.
const maxShort = 40

type archive struct {
	name, path, goos, goarch string
	files                    []string // regular files inside, in archive order
}

func main() {
	distDir := flag.String("dist", "dist", "goreleaser's dist folder")
	index := flag.String("index", filepath.Join("plugins", "krew"), "folder of the committed manifest templates")
	flag.Parse()
	version, err := dist.Version(*distDir)
	if err != nil {
		fail(err)
	}
	archives, err := readArchives(*distDir)
	if err != nil {
		fail(err)
	}
	sums, err := readChecksums(filepath.Join(*distDir, "checksums.txt"))
	if err != nil {
		fail(err)
	}
	for _, bin := range flag.Args() {
		plugin, ok := strings.CutPrefix(bin, "kubectl-")
		if !ok {
			continue
		}
		meta, ok := plugins[plugin]
		if !ok {
			fail(fmt.Errorf("plugin %s has no description in hack/krewmanifests", plugin))
		}
		if len(meta.short) > maxShort {
			fail(fmt.Errorf("plugin %s: the short description %q is longer than %d characters (krew search cuts it)", plugin, meta.short, maxShort))
		}
		mine := archives[bin]
		if len(mine) == 0 {
			fmt.Fprintf(os.Stderr, "krewmanifests: %s has no archives in %s (not built yet); no manifest for %s\n", bin, *distDir, plugin)
			continue
		}
		tmpl, err := manifestTemplate(plugin, bin, version, meta.short, meta.description, mine)
		if err != nil {
			fail(err)
		}
		committed := filepath.Join(*index, plugin+".yaml")
		if err := os.MkdirAll(*index, 0o755); err != nil {
			fail(err)
		}
		if err := os.WriteFile(committed, tmpl, 0o644); err != nil {
			fail(err)
		}
		rendered, err := Render(tmpl, version, func(uri string) (string, error) {
			return checksumOf(*distDir, sums, uri)
		})
		if err != nil {
			fail(fmt.Errorf("%s: %w", committed, err))
		}
		out := filepath.Join(*distDir, "krew", plugin+".yaml")
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			fail(err)
		}
		if err := os.WriteFile(out, rendered, 0o644); err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "krewmanifests: %s (template %s, %d platforms)\n", out, committed, len(mine))
	}
}

// readArchives returns goreleaser's archives by build id, each with the files inside it.
func readArchives(distDir string) (map[string][]archive, error) {
	all, err := dist.Artifacts(distDir)
	if err != nil {
		return nil, err
	}
	out := map[string][]archive{}
	for _, a := range dist.Filter(all, dist.Archive, "") {
		files, err := archiveFiles(a.Path)
		if err != nil {
			return nil, fmt.Errorf("archive %s: %w", a.Name, err)
		}
		out[a.ID()] = append(out[a.ID()], archive{name: a.Name, path: a.Path, goos: a.Goos, goarch: a.Goarch, files: files})
	}
	for id := range out {
		sort.Slice(out[id], func(i, j int) bool {
			x, y := out[id][i], out[id][j]
			return x.goos+"/"+x.goarch < y.goos+"/"+y.goarch
		})
	}
	return out, nil
}

func archiveFiles(p string) ([]string, error) {
	var files []string
	if strings.HasSuffix(p, ".zip") {
		z, err := zip.OpenReader(p)
		if err != nil {
			return nil, err
		}
		defer z.Close()
		for _, f := range z.File {
			if !f.FileInfo().IsDir() {
				files = append(files, f.Name)
			}
		}
		return files, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			files = append(files, h.Name)
		}
	}
}

func readChecksums(p string) (map[string]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sums := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 2 {
			sums[fields[1]] = fields[0]
		}
	}
	return sums, s.Err()
}

// checksumOf is the sha256 of the archive a release URI names: the one checksums.txt lists,
// after checking it against the archive itself.
func checksumOf(distDir string, sums map[string]string, uri string) (string, error) {
	name := path.Base(uri)
	want, ok := sums[name]
	if !ok {
		return "", fmt.Errorf("%s is not in %s/checksums.txt", name, distDir)
	}
	f, err := os.Open(filepath.Join(distDir, name))
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return "", fmt.Errorf("%s: sha256 %s, checksums.txt says %s", name, got, want)
	}
	return want, nil
}

// manifestTemplate writes the manifest of one plugin with the tag and checksums as
// krew-release-bot template calls.
func manifestTemplate(plugin, bin, version, short, description string, archives []archive) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `# Generated by hack/krewmanifests from the release archives. DO NOT EDIT: run `+"`make release-snapshot`"+`.
# A krew-release-bot template: TagName is the release tag, addURIAndSha fills in each archive's URI
# and sha256. make release-snapshot renders it into dist/krew/%[1]s.yaml.
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: %[1]s
spec:
  version: {{ .TagName }}
  homepage: https://github.com/capx-io/capx
  shortDescription: %[2]q
  description: |
%[3]s
  caveats: |
    Shell completion of `+"`kubectl %[1]s`"+` (Linux and macOS) needs the kubectl_complete-%[1]s
    shim on your PATH: krew unpacks it but cannot link it. See
    https://github.com/capx-io/capx/blob/main/completions/README.md
  platforms:
`, plugin, short, indent(description, "    "))
	for _, a := range archives {
		exe := bin
		if a.goos == "windows" {
			exe += ".exe"
		}
		prefix := bin + "_" + version + "_"
		if !strings.HasPrefix(a.name, prefix) {
			return nil, fmt.Errorf("archive %s is not named %s<os>_<arch>: goreleaser.yaml's name_template changed", a.name, prefix)
		}
		uri := releaseURL + "{{ .TagName }}/" + bin + "_{{ .TagName }}_" + strings.TrimPrefix(a.name, prefix)
		fmt.Fprintf(&b, "  - selector:\n      matchLabels:\n        os: %s\n        arch: %s\n", a.goos, a.goarch)
		fmt.Fprintf(&b, "    {{addURIAndSha %q .TagName}}\n", uri)
		fmt.Fprintf(&b, "    bin: %s\n    files:\n", exe)
		found := false
		for _, f := range a.files {
			if f == exe {
				found = true
			}
			fmt.Fprintf(&b, "    - from: %s\n      to: .\n", f)
		}
		if !found {
			return nil, fmt.Errorf("archive %s does not hold %s", a.name, exe)
		}
	}
	return b.Bytes(), nil
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = by + l
	}
	return strings.Join(lines, "\n")
}

// Render fills a template like krew-release-bot does: TagName is the tag, and
// addURIAndSha(uriTemplate, tag) writes the URI with the tag in it and, on the next line at the
// same indentation, the archive's sha256 (from sum).
func Render(tmpl []byte, tag string, sum func(uri string) (string, error)) ([]byte, error) {
	funcs := template.FuncMap{
		"addURIAndSha": func(uri, tag string) (string, error) {
			uri = strings.ReplaceAll(uri, "{{ .TagName }}", tag)
			s, err := sum(uri)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("uri: %s\n    sha256: %s", uri, s), nil
		},
	}
	t, err := template.New("manifest").Funcs(funcs).Parse(string(tmpl))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, struct{ TagName string }{tag}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "krewmanifests:", err)
	os.Exit(1)
}
