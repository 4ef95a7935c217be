package quickstart

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Plugins are the kubectl plugins the quickstart builds into bin/.
var Plugins = []string{"kubectl captf", "kubectl capvco"}

// InstallCompletionShims writes the kubectl_complete-<plugin> shim of every plugin into dir
// (bin/, next to the plugins), so that kubectl completes "kubectl captf <TAB>" once kubectl's
// own completion is loaded.
func InstallCompletionShims(dir string) ([]string, error) {
	var written []string
	for _, p := range Plugins {
		path := filepath.Join(dir, "kubectl_complete-"+strings.TrimPrefix(p, "kubectl "))
		if err := os.WriteFile(path, []byte(cmdutil.CompletionShim(p)), 0o755); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}
