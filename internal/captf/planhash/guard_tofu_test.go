package planhash

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capx-io/capx/internal/testenv"
)

// guardRoot is a pool's root module as CAPTF renders it, reduced to what the guard reads: the
// captf_object and replicas variables, a group, one instance per replica (and one address each)
// and the replicas output, re-exported sensitive.
const guardRoot = `
variable "captf_object" {}
variable "replicas" {}
variable "group_generation" { default = 1 }

resource "terraform_data" "group" {
  triggers_replace = [var.group_generation]
}

resource "terraform_data" "instance" {
  count = var.replicas
  input = { group = terraform_data.group.id, index = count.index }
}

resource "terraform_data" "address" {
  count = var.replicas
  input = terraform_data.instance[count.index].id
}

output "replicas" {
  value     = var.replicas
  sensitive = true
}
`

// TestGuardOnOpenTofuPlans runs the rule on plans a real OpenTofu writes: the fields it reads
// (variables, the replicas output change, action_reason, index) are there and mean what the
// rule assumes. A missing tofu fails the test: run `make toolchain`.
func TestGuardOnOpenTofuPlans(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tofu := filepath.Join(root, "bin", "tofu")
	if _, err := os.Stat(tofu); err != nil {
		t.Fatalf("%s is missing: run `make toolchain` (it builds OpenTofu once per machine)", tofu)
	}
	const pool = "TerraformMachinePool"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(guardRoot), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(tofu, args...)
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "TF_CLI_CONFIG_FILE=/dev/null", "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1"}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("tofu %v: %v\n%s%s", args, err, out.String(), errOut.String())
		}
		return out.Bytes()
	}
	// The values come from a terraform.tfvars.json, as in a Job: untyped variables set with -var
	// would be strings.
	vars := func(kind string, replicas, generation int) string {
		t.Helper()
		b, err := json.Marshal(map[string]any{
			"captf_object": map[string]string{"kind": kind, "name": "p", "namespace": "ns"},
			"replicas":     replicas, "group_generation": generation,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "terraform.tfvars.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return "-var-file=terraform.tfvars.json"
	}
	run("init", "-input=false", "-no-color")
	run("apply", "-auto-approve", "-input=false", "-no-color", vars(pool, 3, 1))

	plan := func(varFile string) []string {
		t.Helper()
		run("plan", "-input=false", "-no-color", "-out=p.tfplan", varFile)
		p, err := Parse(run("show", "-json", "p.tfplan"))
		if err != nil {
			t.Fatal(err)
		}
		return GuardedDeletes(p)
	}
	g := NewWithT(t)
	g.Expect(plan(vars(pool, 2, 1))).To(BeEmpty(), "3 to 2 drops instance[2] and address[2] without an approval")
	g.Expect(plan(vars(pool, 0, 1))).To(BeEmpty(), "3 to 0 too")
	g.Expect(plan(vars(pool, 2, 2))).To(ConsistOf("terraform_data.group"),
		"replacing the group is guarded, even in a scale-down")
	g.Expect(plan(vars("TerraformCluster", 2, 1))).To(ConsistOf("terraform_data.instance[2]", "terraform_data.address[2]"),
		"only a pool scales down")
	g.Expect(plan(vars(pool, 3, 2))).NotTo(BeEmpty(), "a replace without a scale-down is guarded")
}
