// Command sbom writes an SPDX 2.3 JSON software bill of materials for a Go binary from the
// module list the Go linker recorded in it (debug/buildinfo): the main module, every dependency
// module with its version and go.sum hash, and the Go toolchain. goreleaser runs it for every
// binary of a release (see goreleaser.yaml; make release-snapshot builds it into bin/capx-sbom);
// no scanner has to be installed for that.
//
//	go run ./hack/sbom [-dist DIR] -version v1.2.3 -commit SHA -date RFC3339 BINARY OUTPUT.spdx.json
//
// Relative paths are taken inside -dist, when given (goreleaser runs it in its dist folder and
// passes paths relative to it). The release's version, commit and commit date come from
// goreleaser: a -trimpath -buildvcs=false binary records neither (its main module is
// "(devel)"), and the document would otherwise name no release. The date is the document's
// creation time, so the same commit always gives the same document.
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

type document struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      creationInfo   `json:"creationInfo"`
	Packages          []pkg          `json:"packages"`
	Relationships     []relationship `json:"relationships"`
}

type creationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type pkg struct {
	SPDXID           string     `json:"SPDXID"`
	Name             string     `json:"name"`
	VersionInfo      string     `json:"versionInfo,omitempty"`
	DownloadLocation string     `json:"downloadLocation"`
	FilesAnalyzed    bool       `json:"filesAnalyzed"`
	Checksums        []checksum `json:"checksums,omitempty"`
	LicenseDeclared  string     `json:"licenseDeclared,omitempty"`
	SourceInfo       string     `json:"sourceInfo,omitempty"`
	ExternalRefs     []extRef   `json:"externalRefs,omitempty"`
	Comment          string     `json:"comment,omitempty"`
}

type checksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type extRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type relationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// release names what the binary was released as.
type release struct {
	Version, Commit, Date string
	// License is the SPDX expression of the project's own code.
	License string
}

func main() {
	dist := flag.String("dist", "", "folder relative paths are taken in")
	var r release
	flag.StringVar(&r.Version, "version", "", "the release's version, e.g. v1.2.3 (goreleaser: v{{ .Version }})")
	flag.StringVar(&r.Commit, "commit", "", "the release's full commit (goreleaser: {{ .FullCommit }})")
	flag.StringVar(&r.Date, "date", "", "the commit's date, RFC 3339 (goreleaser: {{ .CommitDate }})")
	flag.StringVar(&r.License, "license", "Apache-2.0", "SPDX licence expression of the project's code")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: sbom [-dist DIR] -version V -commit SHA -date RFC3339 BINARY OUTPUT.spdx.json")
		os.Exit(2)
	}
	in, out := inDist(*dist, flag.Arg(0)), inDist(*dist, flag.Arg(1))
	doc, err := build(in, r)
	if err == nil {
		var b []byte
		b, err = json.MarshalIndent(doc, "", "  ")
		if err == nil {
			err = os.WriteFile(out, append(b, '\n'), 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
}

func inDist(dist, p string) string {
	if dist == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dist, p)
}

func (r release) check() error {
	if r.Version == "" || r.Commit == "" || r.Date == "" {
		return errors.New("-version, -commit and -date name the release: goreleaser.yaml passes them")
	}
	if _, err := time.Parse(time.RFC3339, r.Date); err != nil {
		return fmt.Errorf("-date %q: %w", r.Date, err)
	}
	return nil
}

func build(binary string, r release) (*document, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("%s: no Go build information: %w", binary, err)
	}
	sum, err := fileSHA256(binary)
	if err != nil {
		return nil, err
	}
	name := filepath.Base(binary)
	// The document's identity and time derive from the binary's content, so the same binary
	// always gets the same document (reproducible releases).
	doc := &document{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              name + " " + r.Version,
		DocumentNamespace: "https://github.com/capx-io/capx/spdx/" + name + "-" + r.Version + "-" + sum,
		CreationInfo: creationInfo{
			Created:  r.Date,
			Creators: []string{"Tool: capx-hack-sbom", "Organization: capx"},
		},
	}
	source := "built from " + info.Main.Path + " at commit " + r.Commit + " (" + r.Date + ")"
	doc.Packages = append(doc.Packages, pkg{
		SPDXID: "SPDXRef-Binary", Name: name, DownloadLocation: "NOASSERTION",
		VersionInfo:     r.Version,
		Checksums:       []checksum{{Algorithm: "SHA256", Value: sum}},
		LicenseDeclared: r.License, SourceInfo: source,
		Comment: "main package " + info.Path + ", " + info.GoVersion,
	})
	doc.Relationships = append(doc.Relationships, relationship{"SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Binary"})
	add := func(id, path, version, hash string) *pkg {
		p := pkg{
			SPDXID: id, Name: path, VersionInfo: version, DownloadLocation: "NOASSERTION",
			ExternalRefs: []extRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + path + "@" + version}},
		}
		if hash != "" {
			p.Comment = "go.sum " + hash
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, relationship{"SPDXRef-Binary", "CONTAINS", id})
		return &doc.Packages[len(doc.Packages)-1]
	}
	mod := add("SPDXRef-Main", info.Main.Path, r.Version, info.Main.Sum)
	mod.LicenseDeclared, mod.SourceInfo = r.License, source
	mod.DownloadLocation = "git+https://" + info.Main.Path + "@" + r.Commit
	add("SPDXRef-Go", "stdlib", info.GoVersion, "").LicenseDeclared = "BSD-3-Clause"
	for i, d := range info.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		add(fmt.Sprintf("SPDXRef-Module-%d", i), m.Path, m.Version, m.Sum)
	}
	return doc, nil
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
