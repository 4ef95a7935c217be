package state

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/testenv"
)

// TestUpdateFixtures captures testdata/*.json from real OpenTofu runs (bin/tofu, built by
// hack/toolchain.sh tofu) with the kubernetes backend against this package's envtest API
// server, and derives the broken fixtures from those captures. It runs only when asked:
//
//	UPDATE_FIXTURES=1 go test ./internal/captf/state -run TestUpdateFixtures -v
//
// Captures are not reproducible byte for byte (lineages, uuid() values and timestamps
// differ), so regenerate only when a fixture must change, and review the test expectations.
func TestUpdateFixtures(t *testing.T) {
	if os.Getenv("UPDATE_FIXTURES") == "" {
		t.Skip("set UPDATE_FIXTURES=1 to capture the fixtures again with bin/tofu")
	}
	e := liveEnv(t)
	tofu := filepath.Join(e.Root, "bin", "tofu")
	if _, err := os.Stat(tofu); err != nil {
		t.Fatalf("%s not found: run hack/toolchain.sh tofu", tofu)
	}
	ctx := context.Background()
	ns := "captf-fixtures"
	if err := e.Client.Create(ctx, testenv.Namespace(ns)); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	g := &generator{t: t, tofu: tofu, env: e, ns: ns, ctx: ctx}

	single := g.capture("single", moduleOptions{}, "A state written by OpenTofu's kubernetes backend with its default labels: one Secret, gzip, version 4, terraform_data resources (one with count = 3, one with for_each over 2 keys), a data source, the cluster role's contract outputs (sensitive) and two outputs of its own.")
	g.capture("relabeled", moduleOptions{labels: true}, "As single, but written with the labels CAPTF passes with -backend-config=labels=... (managed, owner kind and name, cluster name, clusterctl move); the reader finds it by the backend's own labels and backups keep the extra ones.")
	g.capture("encrypted", moduleOptions{encrypted: true}, "A real OpenTofu encrypted state: an encryption block with a pbkdf2 key provider and aes_gcm for state; the reader must say Encrypted.")
	g.captureLocked()
	g.captureLarge()

	base := single.Secrets[0]
	plain := gunzip(t, base.Data[contract.BackendStateKey])
	{
		var doc map[string]any
		if err := json.Unmarshal(plain, &doc); err != nil {
			t.Fatal(err)
		}
		doc["version"] = 3
		b, _ := json.MarshalIndent(doc, "", "  ")
		writeFixture(t, "version3", fixture{Suffix: single.Suffix, Secrets: []corev1.Secret{withData(base, gz(t, b, gzip.DefaultCompression))},
			Description: "single with its version field edited to 3 and compressed again: Corrupt, naming version 3."})
	}
	{
		data := bytes.Clone(base.Data[contract.BackendStateKey])
		for i := len(data) / 2; i < len(data)/2+16; i++ {
			data[i] ^= 0x5a
		}
		writeFixture(t, "corrupt-gzip", fixture{Suffix: single.Suffix, Secrets: []corev1.Secret{withData(base, data)},
			Description: "single with 16 bytes in the middle of its deflate data flipped: Corrupt."})
	}
	{
		// Whitespace is valid JSON, so only the size bound stops this state: 65 MiB of spaces
		// after the opening brace of a real state, compressed about 1000:1.
		bomb := append([]byte("{"), bytes.Repeat([]byte(" "), 65<<20)...)
		bomb = append(bomb, plain[1:]...)
		writeFixture(t, "gzip-bomb", fixture{Suffix: single.Suffix, Secrets: []corev1.Secret{withData(base, gz(t, bomb, gzip.BestCompression))},
			Description: "single with 65 MiB of whitespace after its opening brace (valid JSON, about 65 KiB compressed): Corrupt, as more than 64 MiB decompressed."})
	}
	small := split(base, base.Data[contract.BackendStateKey], 256)
	writeFixture(t, "chunked-small", fixture{Suffix: single.Suffix, Secrets: small,
		Description: fmt.Sprintf("single's compressed state split into %d chunks of 256 bytes the way Terraform splits (byte ranges of the gzip data; the base Secret, then -part-N; the same labels on each). Small chunks keep the chunk-anomaly fixtures small; the reader does not depend on the chunk size.", len(small))})
	writeFixture(t, "missing-chunk", fixture{Suffix: single.Suffix, Secrets: append([]corev1.Secret{small[0]}, small[2:]...),
		Description: "chunked-small without -part-1: Inconsistent."})
	writeFixture(t, "duplicated-chunk", fixture{Suffix: single.Suffix, Secrets: append(append([]corev1.Secret{}, small...), small[1]),
		Description: "chunked-small with -part-1 listed twice (as a merged list from two sources would): Inconsistent."})
	{
		foreign := *base.DeepCopy()
		foreign.Name = base.Name + "-old"
		writeFixture(t, "foreign-name", fixture{Suffix: single.Suffix, Secrets: []corev1.Secret{base, foreign},
			Description: "single plus a copy named <base>-old that carries the same backend labels (a hand-made copy): Inconsistent."})
	}
	{
		large := loadFixture(t, "chunked")
		stale := withData(base, large.Secrets[1].Data[contract.BackendStateKey])
		stale.Name = ChunkName(base.Name, 1)
		writeFixture(t, "stale-trailing-chunk", fixture{Suffix: single.Suffix, Secrets: []corev1.Secret{base, stale},
			Description: "single (OpenTofu writes one Secret) plus a -part-1 left over from a larger, chunked state (chunk 1 of chunked), as after a Terraform-to-OpenTofu switch or a shrinking write whose cleanup failed: readable, -part-1 reported stale."})
	}
}

type generator struct {
	t    *testing.T
	tofu string
	env  *testenv.Env
	ns   string
	ctx  context.Context
}

type moduleOptions struct {
	labels    bool
	encrypted bool
	sleep     int
	large     int // thousands of uuid() values in one terraform_data
}

// workdir writes the module and the backend configuration for object name.
func (g *generator) workdir(name string, o moduleOptions) (dir, suffix string) {
	dir = g.t.TempDir()
	suffix = contract.StateSuffix(g.ns, captfv1.KindCluster, name)
	backend := fmt.Sprintf("secret_suffix = %q\nnamespace = %q\nconfig_path = %q\n", suffix, g.ns, g.env.KubeconfigPath)
	if o.labels {
		backend += fmt.Sprintf("labels = {\n  %q = \"true\"\n  %q = %q\n  %q = %q\n  %q = \"demo\"\n  %q = \"\"\n}\n",
			captfv1.ManagedLabel, captfv1.OwnerKindLabel, captfv1.KindCluster, captfv1.OwnerNameLabel, name,
			"cluster.x-k8s.io/cluster-name", "clusterctl.cluster.x-k8s.io/move")
	}
	encryption := ""
	if o.encrypted {
		encryption = `
  encryption {
    key_provider "pbkdf2" "fixture" {
      passphrase = "correct-horse-battery-staple"
    }
    method "aes_gcm" "fixture" {
      keys = key_provider.pbkdf2.fixture
    }
    state {
      method = method.aes_gcm.fixture
    }
  }`
	}
	body := fmt.Sprintf(moduleTemplate, encryption, o.sleep)
	if o.large > 0 {
		body = fmt.Sprintf(largeTemplate, o.large)
	}
	upstream := `{"version":4,"terraform_version":"1.12.6","serial":1,"lineage":"3f1c0c8e-1d1e-4c55-9e0e-6f4a55b0f001","outputs":{"region":{"value":"local","type":"string"}},"resources":[],"check_results":null}`
	for file, content := range map[string]string{"main.tf": body, "backend.tfbackend": backend, "upstream.tfstate": upstream, "cli.tfrc": ""} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
			g.t.Fatal(err)
		}
	}
	g.run(dir, "init", "-input=false", "-backend-config=backend.tfbackend")
	return dir, suffix
}

const moduleTemplate = `terraform {
  backend "kubernetes" {}%s
}

variable "sleep" {
  type    = number
  default = %d
}

data "terraform_remote_state" "upstream" {
  backend = "local"
  config  = { path = "${path.module}/upstream.tfstate" }
}

resource "terraform_data" "network" {
  input = { cidr = "10.0.0.0/16", region = data.terraform_remote_state.upstream.outputs.region }
}

resource "terraform_data" "node" {
  count = 3
  input = "node-${count.index}"
}

resource "terraform_data" "zone" {
  for_each = toset(["a", "b"])
  input    = each.key
}

resource "terraform_data" "wait" {
  count = var.sleep > 0 ? 1 : 0
  provisioner "local-exec" {
    command = "sleep ${var.sleep}"
  }
}

output "health" {
  value     = { state = "running", healthy = true, message = "all nodes up" }
  sensitive = true
}

output "control_plane_endpoint" {
  value     = { host = "10.0.0.10", port = 6443 }
  sensitive = true
}

output "failure_domains" {
  value = [
    { name = "a", control_plane = true, attributes = { zone = "a" } },
    { name = "b", attributes = {} },
  ]
  sensitive = true
}

output "exports" {
  value     = { network_id = terraform_data.network.id, cidr = "10.0.0.0/16", nodes = terraform_data.node[*].output }
  sensitive = true
}

output "note" {
  value = "not a contract output"
}

output "admin_password" {
  value     = "fixture-secret-value-do-not-leak"
  sensitive = true
}
`

const largeTemplate = `terraform {
  backend "kubernetes" {}
}

locals {
  ids = flatten([for i in range(%d) : [for j in range(1000) : uuid()]])
}

resource "terraform_data" "big" {
  input = local.ids
}

output "health" {
  value = { state = "running", healthy = true }
}
`

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*m`)

func (g *generator) command(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(g.tofu, append(args[:1:1], append([]string{"-no-color"}, args[1:]...)...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+filepath.Join(dir, "cli.tfrc"), "CHECKPOINT_DISABLE=1",
		"TF_IN_AUTOMATION=1", "HOME="+dir)
	return cmd
}

func (g *generator) tryRun(dir string, args ...string) (string, error) {
	out, err := g.command(dir, args...).CombinedOutput()
	return ansi.ReplaceAllString(string(out), ""), err
}

func (g *generator) run(dir string, args ...string) {
	if out, err := g.tryRun(dir, args...); err != nil {
		g.t.Fatalf("tofu %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (g *generator) secrets(suffix string) []corev1.Secret {
	var list corev1.SecretList
	if err := g.env.Client.List(g.ctx, &list, client.InNamespace(g.ns), Selector(suffix)); err != nil {
		g.t.Fatal(err)
	}
	out := make([]corev1.Secret, 0, len(list.Items))
	for _, s := range list.Items {
		out = append(out, corev1.Secret{ObjectMeta: frozen(s.ObjectMeta), Type: s.Type, Data: s.Data})
	}
	return out
}

func (g *generator) capture(name string, o moduleOptions, description string) fixture {
	dir, suffix := g.workdir(name, o)
	g.run(dir, "apply", "-auto-approve", "-input=false")
	f := fixture{Description: description, Suffix: suffix, Secrets: g.secrets(suffix)}
	writeFixture(g.t, name, f)
	return f
}

// captureLocked applies once, then starts a second apply whose local-exec sleeps, captures the
// lock Lease while it runs, and kills OpenTofu: the lock stays, as a dead runner pod leaves it.
func (g *generator) captureLocked() {
	dir, suffix := g.workdir("locked", moduleOptions{})
	g.run(dir, "apply", "-auto-approve", "-input=false")
	cmd := g.command(dir, "apply", "-auto-approve", "-input=false", "-var", "sleep=120")
	if err := cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var lease coordinationv1.Lease
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := g.env.Client.Get(g.ctx, client.ObjectKey{Namespace: g.ns, Name: contract.LockLeaseName(suffix)}, &lease)
		if err == nil && lease.Annotations[contract.LockInfoAnnotation] != "" {
			break
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("the lock Lease never showed lock info: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	frozenLease := &coordinationv1.Lease{ObjectMeta: frozen(lease.ObjectMeta), Spec: lease.Spec}
	writeFixture(g.t, "locked", fixture{Suffix: suffix, Secrets: g.secrets(suffix), Lease: frozenLease,
		Description: "single's module applied once, then a second apply (its local-exec sleeping) killed while it held the lock: the state Secret and the lock Lease with app.terraform.io/lock-info, as a dead runner leaves them."})
}

// captureLarge applies a state of about 1.1 MiB compressed. OpenTofu 1.12's backend writes one
// Secret and the API server refuses one above 1 MiB, so the apply fails and OpenTofu saves the
// state as errored.tfstate; the fixture is that real state, compressed as the backend
// compresses and split into 1 MiB chunks the way Terraform's backend splits. Should a later
// OpenTofu store it, the Secrets it wrote are captured instead.
func (g *generator) captureLarge() {
	dir, suffix := g.workdir("large", moduleOptions{large: 28})
	out, err := g.tryRun(dir, "apply", "-auto-approve", "-input=false")
	if err == nil {
		writeFixture(g.t, "chunked", fixture{Suffix: suffix, Secrets: g.secrets(suffix),
			Description: "A state above 1 MiB compressed, as the backend stored it."})
		return
	}
	plain, rerr := os.ReadFile(filepath.Join(dir, "errored.tfstate"))
	if rerr != nil {
		g.t.Fatalf("apply of the large state failed without errored.tfstate: %v\n%s", err, out)
	}
	g.t.Logf("OpenTofu did not store the large state itself:\n%s", out)
	if err := os.WriteFile(filepath.Join("testdata", "chunked.tofu-error.txt"), []byte(excerpt(out)), 0o644); err != nil {
		g.t.Fatal(err)
	}
	base := corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: contract.StateSecretName(suffix), Namespace: g.ns,
			Labels: map[string]string{
				contract.BackendStateLabel: "true", contract.BackendSuffixLabel: suffix,
				contract.BackendWorkspaceLabel: "default", contract.BackendManagedByLabel: "terraform",
			},
			Annotations: map[string]string{"encoding": "gzip"},
		},
		Type: corev1.SecretTypeOpaque,
	}
	chunks := split(base, gz(g.t, plain, gzip.DefaultCompression), 1<<20)
	writeFixture(g.t, "chunked", fixture{Suffix: suffix, Secrets: chunks,
		Description: fmt.Sprintf("A real %d-byte state from OpenTofu (errored.tfstate: its backend refused the single %s Secret above 1 MiB, see chunked.tofu-error.txt), gzip-compressed as the backend does and split into %d chunks of 1 MiB the way Terraform's backend splits.", len(plain), base.Name, len(chunks))})
}

// excerpt keeps the lines of OpenTofu's output that explain the failure.
func excerpt(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "Error") || strings.Contains(l, "Too long") || strings.Contains(l, "errored.tfstate") || strings.Contains(l, "Failed") {
			keep = append(keep, strings.TrimSpace(strings.Trim(l, "│╷╵ ")))
		}
	}
	return strings.Join(keep, "\n") + "\n"
}

func gz(t testing.TB, plain []byte, level int) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, level)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gunzip(t testing.TB, data []byte) []byte {
	t.Helper()
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func withData(s corev1.Secret, data []byte) corev1.Secret {
	c := *s.DeepCopy()
	c.Data = map[string][]byte{contract.BackendStateKey: data}
	return c
}

// split cuts compressed state into byte ranges of size, named base, base-part-1, ...
func split(base corev1.Secret, data []byte, size int) []corev1.Secret {
	var out []corev1.Secret
	for i := 0; len(data) > 0; i++ {
		n := min(size, len(data))
		c := withData(base, data[:n])
		c.Name = ChunkName(base.Name, i)
		out = append(out, c)
		data = data[n:]
	}
	return out
}
