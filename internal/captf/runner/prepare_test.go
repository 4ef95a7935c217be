package runner

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestChildEnv(t *testing.T) {
	g := NewWithT(t)
	o := &options{workdir: "/captf/work"}
	env := o.childEnv([]string{"PATH=/bin", "TF_VAR_x=1", "TF_CLI_ARGS=-x", "KUBE_NAMESPACE=ns", "KUBE_CONFIG_PATH=/k",
		"HOME=/root", "VCO_TOKEN=t", "EMPTY="})
	g.Expect(env).To(Equal(map[string]string{
		"PATH":               "/bin",
		"VCO_TOKEN":          "t",
		"EMPTY":              "",
		"HOME":               "/captf/work",
		"TF_DATA_DIR":        "/captf/work/.terraform",
		"TF_CLI_CONFIG_FILE": "/captf/work/cli.tfrc",
		"CHECKPOINT_DISABLE": "1",
	}))
}

func TestCLIConfig(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	o := &options{providers: filepath.Join(dir, "providers")}
	g.Expect(o.cliConfig()).To(Equal("disable_checkpoint = true\n"), "no mirror, no provider_installation")
	must(t, os.Mkdir(o.providers, 0o755))
	g.Expect(o.cliConfig()).To(Equal("disable_checkpoint = true\nprovider_installation {\n  filesystem_mirror {\n    path = \"" +
		o.providers + "\"\n  }\n}\n"))
}

func TestCollectSecrets(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	creds := filepath.Join(dir, "creds")
	must(t, os.MkdirAll(filepath.Join(creds, "..data"), 0o755))
	must(t, os.WriteFile(filepath.Join(creds, "..data", "HIDDEN"), []byte("not-read-directly"), 0o600))
	must(t, os.WriteFile(filepath.Join(creds, "VCO_JWT"), []byte("jwt-from-file\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "main.tf.json"), []byte(`{"variable":{"a":{"sensitive":true},"b":{},"c":{"sensitive":true}}}`), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "terraform.tfvars.json"), []byte(`{"a":"sensitive-a","b":"public-b","c":{"k":["nested-secret",12345]}}`), 0o600))
	o := &options{credentials: creds, config: dir}
	red := newRedactor()
	must(t, o.collectSecrets(red, []string{"VCO_JWT=jwt-from-env", "DB_PASSWORD=hunter22", "PLAIN=visible-value"}))
	g.Expect(red.String("jwt-from-file jwt-from-env hunter22 sensitive-a public-b nested-secret 12345 visible-value")).
		To(Equal("[redacted] [redacted] [redacted] [redacted] public-b [redacted] [redacted] visible-value"))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
