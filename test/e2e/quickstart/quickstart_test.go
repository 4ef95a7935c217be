package quickstart

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The env file moves the credential's in-cluster URLs to the host's loopback port and is
// sourced by a shell as it is written.
func TestEnvFile(t *testing.T) {
	creds := map[string]string{
		"url": "http://10.200.0.17:8080/api/1", "iamURL": "http://10.200.0.17:8080/iam", "customer": "acme",
		"jwt": "eyJ.a'b\"c$d", "clientID": "capvco", "clientSecret": "s3cret",
	}
	got := EnvFile(creds, "http://10.200.0.17:8080", "http://127.0.0.1:18080")
	path := filepath.Join(t.TempDir(), SimulatorEnvFile)
	if err := os.WriteFile(path, []byte(got), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "-c", `. "$1" && printf '%s\n' "$VCO_URL" "$VCO_IAM_URL" "$VCO_CUSTOMER" "$VCO_JWT" "$VCO_CLIENT_ID" "$VCO_CLIENT_SECRET"`, "bash", path).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s\n%s", err, out, got)
	}
	want := "http://127.0.0.1:18080/api/1\nhttp://127.0.0.1:18080/iam\nacme\neyJ.a'b\"c$d\ncapvco\ns3cret\n"
	if string(out) != want {
		t.Fatalf("sourced:\n%s\nwant:\n%s\nfile:\n%s", out, want, got)
	}
	if strings.Contains(got, "10.200.0.17") {
		t.Fatalf("the in-cluster address is left:\n%s", got)
	}
}

func TestHostPort(t *testing.T) {
	if HostPort(16443) != 18080 || HostPort(16444) != 18081 {
		t.Fatal(HostPort(16443), HostPort(16444))
	}
}
