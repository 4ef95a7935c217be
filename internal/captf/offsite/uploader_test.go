package offsite_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capx-io/capx/internal/captf/offsite"
	"github.com/capx-io/capx/internal/captf/offsite/offsitetest"
)

// TestUploaderRetryWaits: a failed object waits RetryMin, then twice as long each time up to
// RetryMax; a success forgets; objects wait apart.
func TestUploaderRetryWaits(t *testing.T) {
	u := offsite.NewUploader(offsite.Target{}, "")
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	if w := u.Wait("a", now); w != 0 {
		t.Fatalf("fresh object waits %s", w)
	}
	var got []time.Duration
	for range 7 {
		got = append(got, u.Failed("a", now, errDenied))
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
	if w := u.Wait("a", now.Add(9*time.Minute)); w != time.Minute {
		t.Fatalf("9 min into a 10 min wait: %s left", w)
	}
	if w := u.Wait("b", now); w != 0 {
		t.Fatalf("another object waits %s", w)
	}
	if w := u.Wait("a", now.Add(10*time.Minute)); w != 0 {
		t.Fatalf("the wait is over, still %s", w)
	}
	if e := u.LastError("a"); e != errDenied.Error() {
		t.Fatalf("last error %q, want %q", e, errDenied)
	}
	if e := u.LastError("b"); e != "" {
		t.Fatalf("another object's last error %q", e)
	}
	u.Succeeded("a")
	if e := u.LastError("a"); e != "" {
		t.Fatalf("a success keeps the last error %q", e)
	}
	if w := u.Failed("a", now, errDenied); w != offsite.RetryMin {
		t.Fatalf("after a success the first wait is %s", w)
	}
}

var errDenied = errors.New("Access Denied")

// TestUploaderReadsTheCredentialEachTime: a rotated credential file is used by the next store.
func TestUploaderReadsTheCredentialEachTime(t *testing.T) {
	dir := t.TempDir()
	srv := offsitetest.Start(t)
	u := offsite.NewUploader(srv.Target(t, ""), dir)
	if _, err := u.Store(); err == nil || !strings.Contains(err.Error(), "mount the credentials Secret") {
		t.Fatalf("no credential: %v", err)
	}
	offsitetest.WriteCredentials(t, dir)
	if _, err := u.Store(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, offsite.CABundleFile), []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Store(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("a bad ca.crt: %v", err)
	}
}
