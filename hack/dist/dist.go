// Package dist reads what goreleaser leaves in its dist folder: the version it built
// (metadata.json) and the artifacts it made (artifacts.json). The release generators and the
// release tests (test/release) read the snapshot through it.
package dist

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Artifact is one entry of artifacts.json.
type Artifact struct {
	Name   string         `json:"name"`
	Path   string         `json:"path"`
	Goos   string         `json:"goos"`
	Goarch string         `json:"goarch"`
	Type   string         `json:"type"`
	Extra  map[string]any `json:"extra"`
}

// ID is the goreleaser build or archive id the artifact belongs to.
func (a Artifact) ID() string { s, _ := a.Extra["ID"].(string); return s }

// Artifact types this project uses.
const (
	Archive = "Archive"
	Binary  = "Binary"
	SBOM    = "SBOM"
)

// Version is the v-prefixed version goreleaser built.
func Version(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "metadata.json"))
	if err != nil {
		return "", fmt.Errorf("%w (run make release-snapshot first)", err)
	}
	var md struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &md); err != nil || md.Version == "" {
		return "", fmt.Errorf("%s: no version (%v)", filepath.Join(dir, "metadata.json"), err)
	}
	return "v" + strings.TrimPrefix(md.Version, "v"), nil
}

// Artifacts lists artifacts.json, with every path made relative to the working directory the
// way goreleaser wrote it (it records paths from where it ran, dist/ included).
func Artifacts(dir string) ([]Artifact, error) {
	b, err := os.ReadFile(filepath.Join(dir, "artifacts.json"))
	if err != nil {
		return nil, fmt.Errorf("%w (run make release-snapshot first)", err)
	}
	var all []Artifact
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "artifacts.json"), err)
	}
	return all, nil
}

// Filter returns the artifacts of a type (and, when id is not empty, of a build id).
func Filter(all []Artifact, typ, id string) []Artifact {
	var out []Artifact
	for _, a := range all {
		if a.Type == typ && (id == "" || a.ID() == id) {
			out = append(out, a)
		}
	}
	return out
}
