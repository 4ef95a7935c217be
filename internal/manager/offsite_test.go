package manager

import (
	"strings"
	"testing"

	"github.com/capx-io/capx/internal/captf/offsite/offsitetest"
)

// TestOffsiteOptions: unset means no uploader; a bad URL or a credential that cannot be read
// stops the manager at start with the flag named.
func TestOffsiteOptions(t *testing.T) {
	o := &Options{}
	if u, err := o.OffsiteUploader(); u != nil || err != nil {
		t.Fatalf("unset: %v, %v", u, err)
	}
	o = &Options{OffsiteBackupURL: "https://objects.example.com/bkt/p", OffsiteBackupCredentials: t.TempDir()}
	if _, err := o.OffsiteUploader(); err == nil || !strings.Contains(err.Error(), "--offsite-backup-credentials=") {
		t.Fatalf("no credential files: %v", err)
	}
	offsitetest.WriteCredentials(t, o.OffsiteBackupCredentials)
	u, err := o.OffsiteUploader()
	if err != nil || u.Target.Bucket != "bkt" || u.Target.Prefix != "p" {
		t.Fatalf("%+v, %v", u, err)
	}
	o.OffsiteBackupURL = "http://objects.example.com/bkt"
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "--offsite-backup-url: ") || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("plain http: %v", err)
	}
}
