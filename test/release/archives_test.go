//go:build release

package release

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/capx-io/capx/hack/dist"
)

// TestArchives checks what goreleaser made for every binary: one archive per platform holding
// the binary and the licence, a matching line in checksums.txt, an SPDX document per binary,
// and, for this machine's platform, a binary that prints the snapshot's version.
func TestArchives(t *testing.T) {
	s := loadSnapshot(t)
	sums := readSums(t, filepath.Join(s.dist, "checksums.txt"))
	archives := dist.Filter(s.artifacts, dist.Archive, "")
	if len(archives) == 0 {
		t.Fatal("no archives in dist/artifacts.json")
	}
	ids := map[string]bool{}
	for _, a := range archives {
		ids[a.ID()] = true
		exe := a.ID()
		if a.Goos == "windows" {
			exe += ".exe"
		}
		files := archiveFiles(t, a.Path)
		for _, want := range []string{exe, "LICENSE"} {
			if !files[want] {
				t.Errorf("%s does not hold %s (has %v)", a.Name, want, files)
			}
		}
		if sum := fileSum(t, a.Path); sums[a.Name] != sum {
			t.Errorf("%s: sha256 %s, checksums.txt says %q", a.Name, sum, sums[a.Name])
		}
	}
	if !ids["manager"] {
		t.Error("no manager archives")
	}
	revision := s.revision
	commitDate := commitTime(t, s.root, revision)
	for _, b := range dist.Filter(s.artifacts, dist.Binary, "") {
		sbom := filepath.Join(s.dist, b.ID()+"_"+s.version+"_"+b.Goos+"_"+b.Goarch+".spdx.json")
		var doc struct {
			SPDXVersion  string `json:"spdxVersion"`
			Name         string `json:"name"`
			CreationInfo struct {
				Created string `json:"created"`
			} `json:"creationInfo"`
			Packages []struct {
				Name            string `json:"name"`
				VersionInfo     string `json:"versionInfo"`
				LicenseDeclared string `json:"licenseDeclared"`
				SourceInfo      string `json:"sourceInfo"`
			} `json:"packages"`
		}
		raw, err := os.ReadFile(sbom)
		if err != nil {
			t.Errorf("SBOM of %s %s/%s: %v", b.ID(), b.Goos, b.Goarch, err)
			continue
		}
		if err := json.Unmarshal(raw, &doc); err != nil || doc.SPDXVersion != "SPDX-2.3" {
			t.Errorf("%s: not an SPDX 2.3 document (%v)", sbom, err)
			continue
		}
		// The document names the release: the version, the commit and its date, the licence.
		if want := filepath.Base(b.Path) + " " + s.version; doc.Name != want || doc.CreationInfo.Created != commitDate {
			t.Errorf("%s: named %q, created %s; want %q created at the commit, %s", sbom, doc.Name, doc.CreationInfo.Created, want, commitDate)
		}
		if p := doc.Packages[0]; p.VersionInfo != s.version || p.LicenseDeclared != "Apache-2.0" || !strings.Contains(p.SourceInfo, revision) {
			t.Errorf("%s: the binary's package has version %q, licence %q, source %q; want %s, Apache-2.0, commit %s", sbom, p.VersionInfo, p.LicenseDeclared, p.SourceInfo, s.version, revision)
		}
		var names []string
		for _, p := range doc.Packages {
			names = append(names, p.Name)
		}
		joined := strings.Join(names, " ")
		for _, want := range []string{"github.com/capx-io/capx", "stdlib", "github.com/spf13/cobra"} {
			if b.ID() != "vcosim" && !strings.Contains(joined, want) {
				t.Errorf("%s lists no %s", sbom, want)
			}
		}
	}
	for _, id := range []string{"manager", "vcosim"} {
		for _, b := range dist.Filter(s.artifacts, dist.Binary, id) {
			if b.Goos != runtime.GOOS || b.Goarch != runtime.GOARCH {
				continue
			}
			if out := run(t, nil, b.Path, "version"); !strings.Contains(out, s.version) {
				t.Errorf("%s version printed %q, want %s", id, out, s.version)
			}
		}
	}
}

// commitTime is a commit's committer date in UTC, as goreleaser's CommitDate gives it.
func commitTime(t *testing.T, root, rev string) string {
	t.Helper()
	out := strings.TrimSpace(run(t, []string{"TZ=UTC"}, "git", "-C", root, "show", "-s", "--format=%cd", "--date=format-local:%Y-%m-%dT%H:%M:%SZ", rev))
	if _, err := time.Parse(time.RFC3339, out); err != nil {
		t.Fatalf("commit date of %s: %q: %v", rev, out, err)
	}
	return out
}

func readSums(t *testing.T, p string) map[string]string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 {
			sums[fields[1]] = fields[0]
		}
	}
	return sums
}

func fileSum(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func archiveFiles(t *testing.T, p string) map[string]bool {
	t.Helper()
	files := map[string]bool{}
	if strings.HasSuffix(p, ".zip") {
		z, err := zip.OpenReader(p)
		if err != nil {
			t.Fatal(err)
		}
		defer z.Close()
		for _, f := range z.File {
			files[f.Name] = true
		}
		return files
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = true
	}
}
