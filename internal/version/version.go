// Package version reports the build's version, stamped at link time by the Makefile and
// goreleaser (-X github.com/capx-io/capx/internal/version.version=...).
package version

import (
	"fmt"
	"runtime"
)

var (
	version = "v0.0.0-dev"
	commit  = "unknown"
	date    = "unknown"
)

// Info is the build's identity.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the build's identity.
func Get() Info {
	return Info{
		Version: version, Commit: commit, BuildDate: date,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String is the one-line form printed by every binary's version command.
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s, %s)", i.Version, i.Commit, i.BuildDate, i.GoVersion, i.Platform)
}
