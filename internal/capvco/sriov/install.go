package sriov

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// InstallPlugin copies the CNI plugin binary src into the node's plugin directory dir under its
// own name. The copy is written beside the target and renamed over it, so a runtime that runs
// the plugin meanwhile executes the old binary or the new one, never a partial file. The agent
// does this itself because its image has no shell to run cp in an init container.
func InstallPlugin(src, dir string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("install the CNI plugin: %w", err)
	}
	defer in.Close()
	dst := filepath.Join(dir, filepath.Base(src))
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(src)+".*")
	if err != nil {
		return fmt.Errorf("install the CNI plugin into %s (is the node's CNI plugin directory mounted?): %w", dir, err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; left behind only by a failure
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fmt.Errorf("install the CNI plugin: copy to %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return fmt.Errorf("install the CNI plugin: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install the CNI plugin: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("install the CNI plugin: %w", err)
	}
	return nil
}
