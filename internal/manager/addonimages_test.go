package manager

import (
	"strings"
	"testing"
)

// TestParseAddonImages: <component>=<image> entries; a malformed entry or an unknown component
// is refused with the known ones named, and every problem is reported at once.
func TestParseAddonImages(t *testing.T) {
	got, err := parseAddonImages([]string{"capvco-cloud-controller-manager=registry.example.com/ccm:v1", " ", "csi-provisioner=r/p:v5"})
	if err != nil || len(got) != 2 || got["capvco-cloud-controller-manager"] != "registry.example.com/ccm:v1" || got["csi-provisioner"] != "r/p:v5" {
		t.Fatalf("good entries: %v, %v", got, err)
	}
	_, err = parseAddonImages([]string{"ccm", "nginx=nginx:1", "capvco-csi-driver="})
	for _, want := range []string{`"ccm": want <component>=<image>`, `unknown component "nginx" (known: capvco-cloud-controller-manager, capvco-csi-driver, capvco-external-dns-webhook, capvco-sriov-agent, csi-attacher`, `"capvco-csi-driver=": want`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}
