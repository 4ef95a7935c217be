package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// An SPDX 2.3 document per image and platform (<name>_linux_<arch>.spdx.json beside the
// layouts): the image, named by its reference and its manifest digest, and what it ships, each
// with its version and licence. The Go modules inside the manager are the binary's own SBOM's
// (goreleaser's, hack/sbom), which the image's document names rather than repeats.

type spdxDoc struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      spdxCreation   `json:"creationInfo"`
	Packages          []spdxPackage  `json:"packages"`
	Relationships     []spdxRelation `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID           string         `json:"SPDXID"`
	Name             string         `json:"name"`
	VersionInfo      string         `json:"versionInfo,omitempty"`
	DownloadLocation string         `json:"downloadLocation"`
	FilesAnalyzed    bool           `json:"filesAnalyzed"`
	Checksums        []spdxChecksum `json:"checksums,omitempty"`
	LicenseDeclared  string         `json:"licenseDeclared"`
	SourceInfo       string         `json:"sourceInfo,omitempty"`
	Comment          string         `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxRelation struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// shipped is one thing an image holds.
type shipped struct {
	name, version, license, download, comment string
}

// baseShipped is what every image's base holds (test/images.BaseContent).
func baseShipped(version string) []shipped {
	return []shipped{
		{"Mozilla NSS root certificates (/etc/ssl/certs/ca-certificates.crt)", moduleVersion("golang.org/x/crypto/x509roots/fallback"), "MPL-2.0",
			"https://pkg.go.dev/golang.org/x/crypto/x509roots/fallback", "from the Go module golang.org/x/crypto/x509roots/fallback"},
		{"time zone database (/usr/share/zoneinfo)", runtime.Version(), "NOASSERTION", "https://www.iana.org/time-zones",
			"the IANA tz database as the Go toolchain ships it (lib/time/zoneinfo.zip); the data is in the public domain"},
		{"capx image base (users, groups, nsswitch.conf, licence notices)", version, "Apache-2.0", "https://github.com/capx-io/capx", ""},
	}
}

// writeSBOMs writes one document per platform of the image layout in out/name.
func writeSBOMs(out, name, ref, version, revision, date string, items func(arch string) []shipped) error {
	p, err := layout.FromPath(filepath.Join(out, name))
	if err != nil {
		return err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return err
	}
	tm, err := top.IndexManifest()
	if err != nil || len(tm.Manifests) != 1 {
		return fmt.Errorf("%s: want one image index (%v)", name, err)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range im.Manifests {
		arch := d.Platform.Architecture
		doc := spdxDoc{
			SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
			Name:              ref + " linux/" + arch,
			DocumentNamespace: "https://github.com/capx-io/capx/spdx/" + name + "-" + version + "-" + d.Digest.Hex,
			CreationInfo:      spdxCreation{Created: date, Creators: []string{"Tool: capx-hack-releaseimages", "Organization: capx"}},
			Packages: []spdxPackage{{
				SPDXID: "SPDXRef-Image", Name: ref, VersionInfo: version, DownloadLocation: "NOASSERTION",
				Checksums:       []spdxChecksum{{Algorithm: "SHA256", Value: d.Digest.Hex}},
				LicenseDeclared: "Apache-2.0 AND MPL-2.0", SourceInfo: "built from github.com/capx-io/capx at commit " + revision,
				Comment: "the linux/" + arch + " image manifest of " + ref + "@" + tm.Manifests[0].Digest.String(),
			}},
			Relationships: []spdxRelation{{"SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Image"}},
		}
		for i, s := range items(arch) {
			id := fmt.Sprintf("SPDXRef-Content-%d", i)
			doc.Packages = append(doc.Packages, spdxPackage{SPDXID: id, Name: s.name, VersionInfo: s.version,
				DownloadLocation: s.download, LicenseDeclared: s.license, Comment: s.comment})
			doc.Relationships = append(doc.Relationships, spdxRelation{"SPDXRef-Image", "CONTAINS", id})
		}
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, name+"_linux_"+arch+".spdx.json"), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// moduleVersion is the version of a module this program was built with (its CA data is the
// images' CA bundle).
func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "NOASSERTION"
}
