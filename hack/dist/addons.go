package dist

import (
	"os"
	"path/filepath"

	"github.com/capx-io/capx/internal/capvco/addons"
)

// AddonComponents are the add-on components the manager delivers into workload clusters from
// the project's own images (<repository>/<component>:<manager version>): the components of
// internal/capvco/addons built from this repository's cmd/<component>. The release builds an
// image for each (hack/releaseimages) and publishes none of the components without them
// (hack/publishimages).
func AddonComponents(repo string) []string {
	var out []string
	for _, c := range addons.Components() {
		if _, err := os.Stat(filepath.Join(repo, "cmd", c, "main.go")); err == nil {
			out = append(out, c)
		}
	}
	return out
}
