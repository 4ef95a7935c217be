// Command sbom writes an SPDX 2.3 JSON software bill of materials for a Go binary from the
// module list the Go linker recorded in it (debug/buildinfo): the main module, every dependency
// module with its version and go.sum hash, and the Go toolchain. goreleaser runs it for every
// binary of a release (see goreleaser.yaml; make release-snapshot builds it into bin/capx-sbom);
// no scanner has to be installed for that.
//
//	go run ./hack/sbom [-dist DIR] BINARY OUTPUT.spdx.json
//
// Relative paths are taken inside -dist, when given (goreleaser runs it in its dist folder and
// passes paths relative to it).
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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

func main() {
	dist := flag.String("dist", "", "folder relative paths are taken in")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: sbom [-dist DIR] BINARY OUTPUT.spdx.json")
		os.Exit(2)
	}
	in, out := inDist(*dist, flag.Arg(0)), inDist(*dist, flag.Arg(1))
	doc, err := build(in)
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

func build(binary string) (*document, error) {
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
		Name:              name,
		DocumentNamespace: "https://github.com/capx-io/capx/spdx/" + name + "-" + sum,
		CreationInfo: creationInfo{
			Created:  buildSetting(info, "vcs.time", "1970-01-01T00:00:00Z"),
			Creators: []string{"Tool: capx-hack-sbom", "Organization: capx"},
		},
	}
	doc.Packages = append(doc.Packages, pkg{
		SPDXID: "SPDXRef-Binary", Name: name, DownloadLocation: "NOASSERTION",
		VersionInfo: info.Main.Version,
		Checksums:   []checksum{{Algorithm: "SHA256", Value: sum}},
		Comment:     "built from " + info.Path + " with " + info.GoVersion,
	})
	doc.Relationships = append(doc.Relationships, relationship{"SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Binary"})
	add := func(id, path, version, hash string) {
		p := pkg{
			SPDXID: id, Name: path, VersionInfo: version, DownloadLocation: "NOASSERTION",
			ExternalRefs: []extRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + path + "@" + version}},
		}
		if hash != "" {
			p.Comment = "go.sum " + hash
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, relationship{"SPDXRef-Binary", "CONTAINS", id})
	}
	add("SPDXRef-Main", info.Main.Path, info.Main.Version, info.Main.Sum)
	add("SPDXRef-Go", "stdlib", info.GoVersion, "")
	for i, d := range info.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		add(fmt.Sprintf("SPDXRef-Module-%d", i), m.Path, m.Version, m.Sum)
	}
	return doc, nil
}

func buildSetting(info *buildinfo.BuildInfo, key, def string) string {
	for _, s := range info.Settings {
		if s.Key == key && strings.TrimSpace(s.Value) != "" {
			return s.Value
		}
	}
	return def
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
