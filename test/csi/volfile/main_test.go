package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteThenRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "marker")
	if err := run([]string{"write", path, "some text"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "some text" {
		t.Fatalf("file holds %q (%v), want %q", b, err, "some text")
	}
	// A second write replaces the content rather than appending to it.
	if err := run([]string{"write", path, "new"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("after a second write the file holds %q", b)
	}
}

func TestRefusesWhatItDoesNotKnow(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{nil, {"write", "x"}, {"read"}, {"show"}, {"delete", "x"}} {
		if err := run(args); err == nil || !strings.Contains(err.Error(), "usage") {
			t.Errorf("run(%q) = %v, want the usage", args, err)
		}
	}
	if err := run([]string{"read", filepath.Join(dir, "missing")}); err == nil {
		t.Error("reading a missing file succeeded")
	}
	// show fails before it holds: a missing file never leaves a Pod running as if it had read.
	if err := run([]string{"show", filepath.Join(dir, "missing")}); err == nil {
		t.Error("showing a missing file succeeded")
	}
	if err := run([]string{"write", filepath.Join(dir, "no", "such", "dir"), "x"}); err == nil {
		t.Error("writing into a missing folder succeeded")
	}
}
