package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSBOMOfAGoBinary(t *testing.T) {
	self, err := os.Executable() // the test binary: a Go binary with build information
	if err != nil {
		t.Fatal(err)
	}
	r := release{Version: "v1.2.3", Commit: "0123456789abcdef0123456789abcdef01234567", Date: "2026-11-30T10:00:00Z", License: "Apache-2.0"}
	doc, err := build(self, r)
	if err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.Packages[0].Checksums[0].Algorithm != "SHA256" || len(doc.Packages[0].Checksums[0].Value) != 64 {
		t.Errorf("document header: %+v", doc.Packages[0])
	}
	var names []string
	for _, p := range doc.Packages {
		names = append(names, p.Name)
	}
	if joined := strings.Join(names, " "); !strings.Contains(joined, "github.com/capx-io/capx") || !strings.Contains(joined, "stdlib") {
		t.Errorf("packages %v", names)
	}
	if len(doc.Relationships) != len(doc.Packages) {
		t.Errorf("%d relationships for %d packages", len(doc.Relationships), len(doc.Packages))
	}
	if doc.Name != filepath.Base(self)+" v1.2.3" || doc.CreationInfo.Created != r.Date {
		t.Errorf("document %q created %s: want it named for the release, created at the commit", doc.Name, doc.CreationInfo.Created)
	}
	for _, p := range doc.Packages[:2] { // the binary and the main module
		if p.VersionInfo != r.Version || p.LicenseDeclared != "Apache-2.0" || !strings.Contains(p.SourceInfo, r.Commit) {
			t.Errorf("%s: version %q, licence %q, source %q; want the release's", p.Name, p.VersionInfo, p.LicenseDeclared, p.SourceInfo)
		}
	}
	for _, bad := range []release{{Commit: r.Commit, Date: r.Date}, {Version: r.Version, Commit: r.Commit, Date: "yesterday"}} {
		if _, err := build(self, bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	again, _ := build(self, r)
	if again.DocumentNamespace != doc.DocumentNamespace || again.CreationInfo.Created != doc.CreationInfo.Created {
		t.Error("two documents of one binary differ")
	}
	if _, err := build("main.go", r); err == nil {
		t.Error("a file that is not a Go binary: no error")
	}
}
