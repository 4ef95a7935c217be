package main

import (
	"strconv"
	"testing"
	"time"
)

// The time the quickstart reports says what it covers: the whole run since the script started
// (the toolchain build included), and the part the steps took.
func TestUpTimeNamesWhatItCovers(t *testing.T) {
	started := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	steps := started.Add(20*time.Minute + 37*time.Second)
	now := steps.Add(86 * time.Second)
	if got, want := upTime(now, steps, strconv.FormatInt(started.Unix(), 10)),
		"in 22m3s since hack/quickstart.sh up started: toolchain, Debian packages and builds 20m37s, then steps 1-5 (images to provisioned samples) 1m26s"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for _, started := range []string{"", "nonsense", strconv.FormatInt(now.Add(time.Hour).Unix(), 10)} {
		if got := upTime(now, steps, started); got != "in 1m26s: steps 1-5, images to provisioned samples" {
			t.Errorf("%q: %s", started, got)
		}
	}
}
