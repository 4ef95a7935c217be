package gpucheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/cli/capvco"
	"github.com/capx-io/capx/internal/cli/capvco/gpucheck"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	engine "github.com/capx-io/capx/internal/gpucheck"
	"github.com/capx-io/capx/internal/gpucheck/gpuchecktest"
	"github.com/capx-io/capx/internal/testenv/golden"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

type result struct {
	code        cmdutil.ExitCode
	out, errOut string
}

type runOpts struct {
	plugin bool              // kubectl capvco instead of capvco-gpucheck
	kube   bool              // reach the management cluster (envtest)
	tty    bool              // streams claim to be terminals
	stdin  io.Reader         // answers to questions
	env    map[string]string // environment (credentials); nil: the fixture's
	// cluster, when set, is the management cluster's client (instead of envtest's).
	cluster func() (client.WithWatch, error)
}

// run executes a command line the way main does, in process.
func run(t *testing.T, f *gpuchecktest.Fixture, o runOpts, args ...string) result {
	t.Helper()
	environ := o.env
	if environ == nil && !o.plugin {
		environ = map[string]string{gpucheck.EnvURL: f.Creds.URL, gpucheck.EnvCustomer: f.Creds.Customer, gpucheck.EnvJWT: f.Creds.JWT}
	}
	for _, k := range []string{gpucheck.EnvURL, gpucheck.EnvCustomer, gpucheck.EnvJWT, gpucheck.EnvClientID, gpucheck.EnvClientSecret, gpucheck.EnvIAMURL} {
		t.Setenv(k, environ[k])
	}
	streams, _, out, errOut := cmdutil.TestIOStreams(o.tty)
	if o.stdin != nil {
		streams.In = o.stdin
	}
	var c client.WithWatch
	if o.kube {
		var err error
		if c, err = client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme}); err != nil {
			t.Fatal(err)
		}
		if err := f.ApplyTo(context.Background(), env.Client); err != nil {
			t.Fatal(err)
		}
	}
	name := gpucheck.StandaloneName
	if o.plugin {
		name = capvco.Name
	}
	fac := cmdutil.NewTestFactory(streams, name, env.Config, c, nil, "default")
	if o.cluster != nil {
		fac.Client = o.cluster
	}
	root := gpucheck.NewStandalone(fac)
	if o.plugin {
		root = capvco.NewRoot(fac)
	}
	root.SetContext(context.Background())
	code := cmdutil.Execute(root, streams, gpucheck.NormalizeArgs(root, args))
	return result{code: code, out: out.String(), errOut: errOut.String()}
}

func wantCode(t *testing.T, r result, code cmdutil.ExitCode) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.out, r.errOut)
	}
}

// TestSeedCommandVerbatim: the seed's `capvco-gpucheck -location <location> -orphans`, with
// credentials from the environment, exits 1 and lists exactly the orphans.
func TestSeedCommandVerbatim(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	t.Run("management cluster", func(t *testing.T) {
		r := run(t, f, runOpts{kube: true}, "-location", gpuchecktest.Loc, "-orphans")
		wantCode(t, r, cmdutil.ExitFound)
		golden.Assert(t, filepath.Join("testdata", "orphans.golden"), []byte(r.out))
		if r.errOut != "" {
			t.Fatalf("stderr: %s", r.errOut)
		}
	})
	t.Run("names only", func(t *testing.T) {
		r := run(t, f, runOpts{}, "-location", gpuchecktest.Loc, "-orphans")
		wantCode(t, r, cmdutil.ExitFound)
		golden.Assert(t, filepath.Join("testdata", "orphans-unverified.golden"), []byte(r.out))
		if !strings.Contains(r.errOut, "Warning: ownership not checked: the management cluster could not be asked") {
			t.Fatalf("no warning that ownership was not checked: %q", r.errOut)
		}
	})
	t.Run("every class", func(t *testing.T) {
		r := run(t, f, runOpts{kube: true}, "-location="+gpuchecktest.Loc, "--all")
		wantCode(t, r, cmdutil.ExitFound)
		golden.Assert(t, filepath.Join("testdata", "all.golden"), []byte(r.out))
	})
}

// TestJSON: -o json carries the class of every reservation, across both locations and the
// 1,250 paginated ones, and the exit code still says orphans were found.
func TestJSON(t *testing.T) {
	f := gpuchecktest.Seed(t, true)
	r := run(t, f, runOpts{kube: true}, "-o", "json", "--page-size", "200", "--all")
	wantCode(t, r, cmdutil.ExitFound)
	var got struct {
		APIVersion, Kind string
		Complete         bool
		OwnershipChecked bool
		Reservations     []engine.Finding
		Summary          engine.Summary
	}
	if err := json.Unmarshal([]byte(r.out), &got); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	if got.APIVersion != cmdutil.APIVersion || got.Kind != "GPUCheck" || !got.Complete || !got.OwnershipChecked {
		t.Fatalf("header %s %s complete=%v ownership=%v", got.APIVersion, got.Kind, got.Complete, got.OwnershipChecked)
	}
	classes := map[string]engine.Class{}
	for _, fd := range got.Reservations {
		classes[fd.ID] = fd.Class
	}
	for _, c := range gpuchecktest.Cases {
		if classes[f.IDs[c.Label]] != c.Want {
			t.Errorf("%s: %s, want %s", c.Label, classes[f.IDs[c.Label]], c.Want)
		}
	}
	for _, id := range f.BulkOrphanIDs {
		if classes[id] != engine.Orphaned {
			t.Fatalf("bulk %s: %s", id, classes[id])
		}
	}
	if want := len(gpuchecktest.Cases) + gpuchecktest.BulkOrphans + gpuchecktest.BulkForeign; got.Summary.Reservations != want {
		t.Fatalf("%d reservations, want %d", got.Summary.Reservations, want)
	}
}

// TestNoOrphansExitsZero: a location with nothing of ours left says so and exits 0.
func TestNoOrphansExitsZero(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	if _, err := f.Sim.ReserveVGPUs(vcosim.SeedCustomer, gpuchecktest.Loc2, vcosim.SeedStubGPUProfile, "team-gpu", "capvco_ns_c1_m1_gpu_5"); err != nil {
		t.Fatal(err)
	}
	r := run(t, f, runOpts{kube: true}, "-location", gpuchecktest.Loc2, "-orphans")
	wantCode(t, r, cmdutil.ExitOK)
	if r.out != "No orphaned vGPU reservations among 2 reservations in 1 location.\n" {
		t.Fatalf("stdout %q", r.out)
	}
}

// TestFaultsExitTwo: 403, 500, 503 and timeouts, at the start or in the middle of the
// listing, exit 2 with the API's message and never say "no orphans".
func TestFaultsExitTwo(t *testing.T) {
	const route = "GET /customers/{customer_id}/locations/{location}/vgpus"
	cases := []struct {
		name  string
		fault func(f *gpuchecktest.Fixture)
		args  []string
		msg   string
	}{
		{"403", func(f *gpuchecktest.Fixture) {
			f.Sim.Faults().Add(vcosim.Fault{Route: route, Status: 403, Message: "Forbidden: access denied: read permission on location is not granted"})
		}, nil, "403 Forbidden: Forbidden: access denied"},
		{"500 mid-listing", func(f *gpuchecktest.Fixture) {
			f.Sim.Faults().Script(route, vcosim.Fault{}, vcosim.Fault{}, vcosim.Fault{Status: 500})
		}, nil, "the vGPU list stopped after 384 of 1250 reservations"}, // pages overlap by 16
		{"503", func(f *gpuchecktest.Fixture) { f.Sim.Faults().Add(vcosim.Fault{Route: route, Status: 503}) }, nil, "503 Service Unavailable"},
		{"timeout mid-listing", func(f *gpuchecktest.Fixture) {
			f.Sim.Faults().Script(route, vcosim.Fault{}, vcosim.Fault{Timeout: true})
		}, []string{"--api-timeout", "1s"}, "stopped after 200 of 1250"},
		{"locations", func(f *gpuchecktest.Fixture) {
			f.Sim.Faults().Add(vcosim.Fault{Route: "GET /customers/{customer_id}/locations", Status: 500})
		}, []string{"--location="}, "listing the customer's locations"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := gpuchecktest.Seed(t, true)
			tc.fault(f)
			args := append([]string{"-location", gpuchecktest.Loc2, "-orphans", "--api-retries", "1", "--page-size", "200"}, tc.args...)
			if tc.name == "locations" {
				args = []string{"-orphans", "--api-retries", "1"}
			}
			r := run(t, f, runOpts{kube: true}, args...)
			wantCode(t, r, cmdutil.ExitFailure)
			if !strings.Contains(r.errOut, tc.msg) || !strings.Contains(r.errOut, "nothing is concluded") && tc.name != "locations" {
				t.Fatalf("stderr lacks %q:\n%s", tc.msg, r.errOut)
			}
			if strings.Contains(r.out, "No orphaned") {
				t.Fatalf("an incomplete listing reported no orphans:\n%s", r.out)
			}
			if tc.name != "locations" && !strings.Contains(r.out, "INCOMPLETE:") {
				t.Fatalf("stdout does not say the listing is incomplete:\n%s", r.out)
			}
			f.Sim.Faults().Reset()
			tc.fault(f)
			js := run(t, f, runOpts{kube: true}, append(args, "-o", "json")...)
			if js.code != cmdutil.ExitFailure || tc.name != "locations" && !strings.Contains(js.out, `"complete": false`) {
				t.Fatalf("json: exit %d\n%s", js.code, js.out)
			}
		})
	}
}

// TestCredentialSources: flags and files, the environment, a named Secret and the
// VCOClusters' Secrets reach the same account; bad input says what is missing.
func TestCredentialSources(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	jwt := filepath.Join(t.TempDir(), "jwt")
	if err := os.WriteFile(jwt, []byte(f.Creds.JWT+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	none := map[string]string{}
	for name, tc := range map[string]struct {
		o    runOpts
		args []string
	}{
		"flags":        {runOpts{env: none}, []string{"--url", f.Creds.URL, "--customer", f.Creds.Customer, "--jwt-file", jwt}},
		"environment":  {runOpts{}, nil},
		"named Secret": {runOpts{env: none, kube: true}, []string{"--credentials-secret", gpuchecktest.Namespace + "/" + gpuchecktest.SecretName}},
		"VCOClusters":  {runOpts{env: none, kube: true}, nil},
		"plugin":       {runOpts{plugin: true, kube: true}, []string{"gpucheck", "orphans"}},
	} {
		t.Run(name, func(t *testing.T) {
			args := append(tc.args, "-location", gpuchecktest.Loc, "-o", "json")
			if tc.o.plugin {
				args = append(tc.args, "--location", gpuchecktest.Loc, "-o", "json")
			}
			r := run(t, f, tc.o, args...)
			wantCode(t, r, cmdutil.ExitFound)
			var got engine.Report
			if err := json.Unmarshal([]byte(r.out), &got); err != nil || got.Summary.Reservations != len(gpuchecktest.Cases) {
				t.Fatalf("%v: %+v", err, got.Summary)
			}
		})
	}
	t.Run("release hint repeats the flags", func(t *testing.T) {
		r := run(t, f, runOpts{env: none}, "--url", f.Creds.URL, "--customer", f.Creds.Customer, "--jwt-file", jwt, "-location", gpuchecktest.Loc, "--ownership", "off")
		wantCode(t, r, cmdutil.ExitFound)
		// Names only: nothing is releasable without an opt-in, so the hint carries the one
		// that releases the unverified orphans.
		const lead = "release them with: capvco-gpucheck "
		want := lead + "release --location " + gpuchecktest.Loc + " --url " + f.Creds.URL + " --customer acme --jwt-file " + jwt + " --ownership off --allow-unverified\n"
		if !strings.HasSuffix(r.out, want) || strings.Contains(r.out, f.Creds.JWT) {
			t.Fatalf("stdout ends %q, want %q", r.out[max(0, len(r.out)-300):], want)
		}
		// The hint works as printed.
		args := strings.Fields(strings.TrimPrefix(strings.TrimSuffix(want, "\n"), lead))
		rel := run(t, f, runOpts{env: none}, append(args, "--yes")...)
		wantCode(t, rel, cmdutil.ExitFound)
		if !strings.Contains(rel.out, "Released 8, skipped 0, failed 0.") {
			t.Fatalf("the hinted release:\n%s\n%s", rel.out, rel.errOut)
		}
	})
	t.Run("missing customer", func(t *testing.T) {
		r := run(t, f, runOpts{env: map[string]string{gpucheck.EnvURL: f.Creds.URL, gpucheck.EnvJWT: f.Creds.JWT}}, "-location", gpuchecktest.Loc)
		wantCode(t, r, cmdutil.ExitFailure)
		if !strings.Contains(r.errOut, `"customer" (the customer id) is empty`) || strings.Contains(r.errOut, f.Creds.JWT) {
			t.Fatalf("stderr: %s", r.errOut)
		}
	})
	t.Run("unknown location", func(t *testing.T) {
		r := run(t, f, runOpts{}, "-location", "nl-rmd-dc01-00l", "-orphans")
		wantCode(t, r, cmdutil.ExitFailure)
		if !strings.Contains(r.errOut, "Customer has no access to location") ||
			!strings.Contains(r.errOut, "the customer's locations are nl-rmd-dc01-001, be-mac-dc01-001; --location nl-rmd-dc01-00l is not one of them") {
			t.Fatalf("stderr: %s", r.errOut)
		}
	})
	t.Run("nothing at all", func(t *testing.T) {
		r := run(t, f, runOpts{env: none}, "-location", gpuchecktest.Loc)
		wantCode(t, r, cmdutil.ExitFailure)
		if !strings.Contains(r.errOut, "no credentials") {
			t.Fatalf("stderr: %s", r.errOut)
		}
	})
}

func TestNormalizeArgs(t *testing.T) {
	f := cmdutil.NewTestFactory(&cmdutil.IOStreams{In: &bytes.Buffer{}, Out: io.Discard, ErrOut: io.Discard}, gpucheck.StandaloneName, nil, nil, nil, "")
	root := gpucheck.NewStandalone(f)
	for _, tc := range []struct{ in, want string }{
		{"-location L -orphans", "--location L --orphans"},
		{"-location=L -orphans=true", "--location=L --orphans=true"},
		{"-o json -y", "-o json -y"},
		{"-ojson", "-ojson"},
		{"release -yes -id x", "release --yes --id x"},
		{"-location L -- -orphans", "--location L -- -orphans"},
		{"-nosuchflag", "-nosuchflag"},
	} {
		if got := strings.Join(gpucheck.NormalizeArgs(root, strings.Fields(tc.in)), " "); got != tc.want {
			t.Errorf("%q -> %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestExitCodePerClass: an account holding a single reservation of each kind exits 1 exactly
// when that reservation is an orphan, with and without the management cluster.
func TestExitCodePerClass(t *testing.T) {
	for _, c := range gpuchecktest.Cases {
		t.Run(c.Label, func(t *testing.T) {
			f := gpuchecktest.SeedOne(t, c)
			for _, kube := range []bool{true, false} {
				want := c.Want
				if !kube {
					want = c.WantUnverified
				}
				r := run(t, f, runOpts{kube: kube}, "-location", gpuchecktest.Loc, "-o", "json", "--all", "--ownership", map[bool]string{true: "required", false: "off"}[kube])
				var got engine.Report
				if err := json.Unmarshal([]byte(r.out), &got); err != nil || len(got.Findings) != 1 {
					t.Fatalf("kube=%v: %v\n%s\n%s", kube, err, r.out, r.errOut)
				}
				fd := got.Findings[0]
				code := cmdutil.ExitOK
				if fd.Orphan {
					code = cmdutil.ExitFound
				}
				if fd.Class != want || r.code != code {
					t.Fatalf("kube=%v: class %s exit %d, want %s exit %d (%s)", kube, fd.Class, r.code, want, code, fd.Reason)
				}
				wantOrphan := want != engine.Owned && want != engine.Foreign && (c.AttachTo == "" || want == engine.AttachedForeign)
				if fd.Orphan != wantOrphan {
					t.Fatalf("kube=%v: orphan %v, want %v", kube, fd.Orphan, wantOrphan)
				}
			}
		})
	}
}

// TestSeedCommandUnderChurn: the documented command, while another team releases a
// reservation before the cursor and reserves one between every two pages (the simulator
// does it before each page): the orphan that moves onto the page boundary is still found,
// and the check exits 1, not "No orphaned vGPU reservations" and 0.
func TestSeedCommandUnderChurn(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	names := make([]string, 0, 101)
	for i := range 100 {
		if i == 50 {
			names = append(names, "capvco_gone_c_m0_gpu_0") // the first of the second page
		}
		names = append(names, fmt.Sprintf("%s%d", gpuchecktest.TeamPrefix, i))
	}
	ids, err := f.Sim.ReserveVGPUs(vcosim.SeedCustomer, gpuchecktest.Loc2, vcosim.SeedStubGPUProfile, names...)
	if err != nil {
		t.Fatal(err)
	}
	f.Sim.SetVGPUListHook(vcosim.TeamChurn(gpuchecktest.TeamPrefix, 1, 1))
	r := run(t, f, runOpts{kube: true}, "-location", gpuchecktest.Loc2, "-orphans", "--page-size", "50")
	wantCode(t, r, cmdutil.ExitFound)
	if !strings.Contains(r.out, ids[50]) || !strings.Contains(r.out, "1 orphaned reservation") {
		t.Fatalf("the orphan %s is not reported:\n%s", ids[50], r.out)
	}
}

// TestJSONListsWhatTextLists: -orphans -o json lists the orphans, as the text does, not every
// reservation of other teams; its counts are the text's (unverified ones are not releasable
// without --allow-unverified in either).
func TestJSONListsWhatTextLists(t *testing.T) {
	f := gpuchecktest.Seed(t, false)
	for _, kube := range []bool{true, false} {
		args := []string{"-location", gpuchecktest.Loc, "-orphans"}
		text := run(t, f, runOpts{kube: kube}, args...)
		js := run(t, f, runOpts{kube: kube}, append(args, "-o", "json")...)
		wantCode(t, js, cmdutil.ExitFound)
		var got gpucheck.Check
		if err := json.Unmarshal([]byte(js.out), &got); err != nil {
			t.Fatalf("%v\n%s", err, js.out)
		}
		if got.Listed != "orphans" || len(got.Findings) != got.Summary.Orphans {
			t.Fatalf("kube=%v: listed %q, %d reservations for %d orphans", kube, got.Listed, len(got.Findings), got.Summary.Orphans)
		}
		for _, fd := range got.Findings {
			if !fd.Orphan {
				t.Fatalf("kube=%v: -orphans -o json lists %s (%s, %s)", kube, fd.ID, fd.Name, fd.Class)
			}
		}
		if !strings.Contains(text.out, fmt.Sprintf("(%d releasable", got.Summary.Releasable)) {
			t.Fatalf("kube=%v: JSON counts %d releasable, the text says:\n%s", kube, got.Summary.Releasable, text.out)
		}
		if !kube && (got.Summary.Releasable != 0 || got.Summary.ReleasableWith[engine.OptInUnverified] == 0) {
			t.Fatalf("names only: summary %+v", got.Summary)
		}
	}
}
