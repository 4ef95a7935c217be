package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestTemplateRendersWithEachArchivesChecksum(t *testing.T) {
	archives := []archive{
		{name: "kubectl-captf_v1.2.3_linux_amd64.tar.gz", goos: "linux", goarch: "amd64", files: []string{"LICENSE", "kubectl-captf", "kubectl_complete-captf"}},
		{name: "kubectl-captf_v1.2.3_windows_arm64.zip", goos: "windows", goarch: "arm64", files: []string{"LICENSE", "kubectl-captf.exe"}},
	}
	tmpl, err := manifestTemplate("captf", "kubectl-captf", "v1.2.3", "short", "long\ntext", archives)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(tmpl), "v1.2.3") {
		t.Errorf("the template holds the build's version; it must only name {{ .TagName }}:\n%s", tmpl)
	}
	out, err := Render(tmpl, "v9.9.9", func(uri string) (string, error) {
		return fmt.Sprintf("sum-of-%s", uri[strings.LastIndex(uri, "/")+1:]), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"version: v9.9.9",
		"    uri: https://github.com/capx-io/capx/releases/download/v9.9.9/kubectl-captf_v9.9.9_linux_amd64.tar.gz\n    sha256: sum-of-kubectl-captf_v9.9.9_linux_amd64.tar.gz\n    bin: kubectl-captf\n",
		"sha256: sum-of-kubectl-captf_v9.9.9_windows_arm64.zip\n    bin: kubectl-captf.exe\n",
		"    - from: kubectl_complete-captf\n      to: .\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("rendered manifest lacks %q:\n%s", want, out)
		}
	}

	if _, err := manifestTemplate("captf", "kubectl-captf", "v1.2.3", "s", "d", []archive{{name: "other_v1.2.3_linux_amd64.tar.gz", goos: "linux"}}); err == nil {
		t.Error("an archive named otherwise: no error")
	}
	if _, err := manifestTemplate("captf", "kubectl-captf", "v1.2.3", "s", "d", []archive{{name: "kubectl-captf_v1.2.3_linux_amd64.tar.gz", goos: "linux", files: []string{"LICENSE"}}}); err == nil {
		t.Error("an archive without the binary: no error")
	}
}

// TestDescriptions: krew search shows the short description whole, and the description says
// what the plugin is for without listing its commands (they change; --help lists them).
func TestDescriptions(t *testing.T) {
	for name, p := range plugins {
		if len(p.short) > maxShort || p.short == "" {
			t.Errorf("%s: short description %q: want 1-%d characters", name, p.short, maxShort)
		}
		for _, cmd := range []string{"plan list", "approve", "backups", "restore", "owners", "preflight", "gpucheck", "logs"} {
			if strings.Contains(p.description, cmd) {
				t.Errorf("%s: the description names the command %q: say what the plugin is for, --help lists the commands", name, cmd)
			}
		}
	}
}
