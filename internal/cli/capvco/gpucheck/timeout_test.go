package gpucheck_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/cli/capvco/gpucheck"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/gpucheck/gpuchecktest"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

// silent is a server that accepts every request and never answers it (until the test ends).
func silent(t *testing.T) *httptest.Server {
	t.Helper()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(stop); srv.Close() })
	return srv
}

// silentCluster is a management cluster whose API server never answers: the client is
// built lazily, as the real one is, and its first List waits on the REST mapper's
// discovery, which takes no context.
func silentCluster(t *testing.T) func() (client.WithWatch, error) {
	srv := silent(t)
	return func() (client.WithWatch, error) {
		return client.NewWithWatch(&rest.Config{Host: srv.URL}, client.Options{Scheme: env.Scheme})
	}
}

// TestTimeoutEndsAHungListing: a whitesky.cloud that holds every list call ends the check at
// --timeout with exit 2, whatever --api-timeout and --api-retries allow, and the message
// says what ran out. (The deadline is shortened; the defaults are TestDefaultsEndACronRun's.)
func TestTimeoutEndsAHungListing(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	f.Sim.Faults().Add(vcosim.Fault{Route: "GET /customers/{customer_id}/locations/{location}/vgpus", Timeout: true})
	r := run(t, f, runOpts{}, "-location", gpuchecktest.Loc, "-orphans", "--timeout", "300ms")
	wantCode(t, r, cmdutil.ExitFailure)
	if !strings.Contains(r.errOut, "--timeout 300ms ran out before the run finished") || strings.Contains(r.out, "No orphaned") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", r.out, r.errOut)
	}
}

// TestTimeoutEndsHungReleases: releases the platform never answers end at --timeout with
// exit 2; the one in flight fails, the rest are skipped as not tried, and nothing is
// released behind the operator's back.
func TestTimeoutEndsHungReleases(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	f.Sim.Faults().Add(vcosim.Fault{Route: "DELETE /customers/{customer_id}/locations/{location}/vgpus/{vgpu_id}", Timeout: true})
	before := len(billedAll(f))
	// Long enough for a loaded machine to list 22 reservations (it takes milliseconds), short
	// enough to wait for: the first release holds until the deadline.
	r := run(t, f, runOpts{kube: true}, "release", "--location", gpuchecktest.Loc, "--yes", "--timeout", "5s")
	wantCode(t, r, cmdutil.ExitFailure)
	if !strings.Contains(r.errOut, "--timeout 5s ran out before the run finished") || strings.Contains(r.errOut, "nothing was released") {
		t.Fatalf("want the deadline to end the releases, not the listing; stderr:\n%s", r.errOut)
	}
	if !strings.Contains(r.out, "not tried: --timeout 5s ran out") || !strings.Contains(r.errOut, "released 0 of 5") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", r.out, r.errOut)
	}
	if len(billedAll(f)) != before {
		t.Fatal("a reservation was released")
	}
}

// TestClusterTimeout: a management cluster that accepts connections and never answers ends
// the check at --cluster-timeout: exit 2 with --ownership=required, a warning and names only
// with auto; and --timeout bounds it when --cluster-timeout is off.
func TestClusterTimeout(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	cluster := silentCluster(t)
	r := run(t, f, runOpts{cluster: cluster}, "-location", gpuchecktest.Loc, "-orphans", "--ownership", "required", "--cluster-timeout", "200ms")
	wantCode(t, r, cmdutil.ExitFailure)
	if !strings.Contains(r.errOut, "the management cluster did not answer within 200ms (--cluster-timeout)") {
		t.Fatalf("required: stderr:\n%s", r.errOut)
	}
	r = run(t, f, runOpts{cluster: cluster}, "-location", gpuchecktest.Loc, "-orphans", "--cluster-timeout", "200ms")
	wantCode(t, r, cmdutil.ExitFound)
	if !strings.Contains(r.errOut, "Warning: ownership not checked") || !strings.Contains(r.errOut, "did not answer within 200ms") {
		t.Fatalf("auto: stderr:\n%s", r.errOut)
	}
	r = run(t, f, runOpts{cluster: cluster}, "-location", gpuchecktest.Loc, "-orphans", "--ownership", "required", "--cluster-timeout", "0", "--timeout", "300ms")
	wantCode(t, r, cmdutil.ExitFailure)
	if !strings.Contains(r.errOut, "--timeout 300ms ran out") {
		t.Fatalf("--timeout: stderr:\n%s", r.errOut)
	}
}

// TestDefaultsEndACronRun: with no flags, every command's run is bounded by a --timeout of
// a minute, each management-cluster call by 15s and each API attempt by 20s.
func TestDefaultsEndACronRun(t *testing.T) {
	fac := cmdutil.NewTestFactory(&cmdutil.IOStreams{}, gpucheck.StandaloneName, nil, nil, nil, "")
	root := gpucheck.NewStandalone(fac)
	release, _, err := root.Find([]string{"release"})
	if err != nil {
		t.Fatal(err)
	}
	plugin := gpucheck.NewCmd(fac)
	orphans, _, _ := plugin.Find([]string{"orphans"})
	pluginRelease, _, _ := plugin.Find([]string{"release"})
	for _, cmd := range []*cobra.Command{root, release, orphans, pluginRelease} {
		for flag, want := range map[string]string{"timeout": "1m0s", "cluster-timeout": "15s", "api-timeout": "20s", "api-retries": "3"} {
			got := "(no such flag)"
			if fl := cmd.Flags().Lookup(flag); fl != nil {
				got = fl.DefValue
			}
			if got != want {
				t.Errorf("%s --%s: default %s, want %s", cmd.CommandPath(), flag, got, want)
			}
		}
	}
}
