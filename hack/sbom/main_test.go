package main

import (
	"os"
	"strings"
	"testing"
)

func TestSBOMOfAGoBinary(t *testing.T) {
	self, err := os.Executable() // the test binary: a Go binary with build information
	if err != nil {
		t.Fatal(err)
	}
	doc, err := build(self)
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
	again, _ := build(self)
	if again.DocumentNamespace != doc.DocumentNamespace || again.CreationInfo.Created != doc.CreationInfo.Created {
		t.Error("two documents of one binary differ")
	}
	if _, err := build("main.go"); err == nil {
		t.Error("a file that is not a Go binary: no error")
	}
}
