package inputs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/capx-io/capx/internal/captf/contract"
)

// TestRenderedRootRunsWithOpenTofu gives the rendered root of each role, next to that role's
// test module, to a real OpenTofu: `init -backend=false` and `validate` accept it, and a plan
// (with the backend overridden by a local one) accepts every value against the module's
// variable types and validations. A missing tofu fails the test: run `make toolchain`.
func TestRenderedRootRunsWithOpenTofu(t *testing.T) {
	tofu := filepath.Join(env.Root, "bin", "tofu")
	if _, err := os.Stat(tofu); err != nil {
		t.Fatalf("%s is missing: run `make toolchain` (it builds OpenTofu once per machine)", tofu)
	}
	for role, src := range sources() {
		t.Run(string(role), func(t *testing.T) {
			t.Parallel()
			modules := filepath.Join(env.Root, "test", "modules", string(role))
			if _, err := os.Stat(modules); err != nil {
				t.Fatalf("the %s test module is missing at %s", role, modules)
			}
			r, err := Render(src)
			if err != nil {
				t.Fatal(err)
			}
			// The Job's layout: the module at /captf/module, the root at /captf/work/root.
			dir := t.TempDir()
			module := filepath.Join(dir, "module")
			root := filepath.Join(dir, "work", contract.RootDirName)
			if err := os.CopyFS(module, os.DirFS(modules)); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(root, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, b := range r.Data() {
				if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cliConfig := filepath.Join(dir, "cli.tfrc")
			if err := os.WriteFile(cliConfig, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			run := func(args ...string) {
				t.Helper()
				cmd := exec.Command(tofu, args...)
				cmd.Dir = root
				cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "TF_CLI_CONFIG_FILE=" + cliConfig, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1"}
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Run(); err != nil {
					t.Fatalf("tofu %v: %v\n%s", args, err, out.String())
				}
			}
			run("init", "-backend=false", "-input=false", "-no-color")
			run("validate", "-no-color")

			override := `{"terraform": {"backend": {"local": {"path": "../terraform.tfstate"}}}}`
			if err := os.WriteFile(filepath.Join(root, "backend_override.tf.json"), []byte(override), 0o644); err != nil {
				t.Fatal(err)
			}
			run("init", "-input=false", "-no-color", "-reconfigure")
			run("plan", "-input=false", "-no-color", "-lock=false", "-var-file="+contract.VarsFile)
		})
	}
}
