package state

import (
	"flag"
	"os"
	"testing"

	"github.com/capx-io/capx/internal/testenv"
)

var env *testenv.Env

// TestMain starts one envtest API server for the package's live tests. Fuzz workers and runs
// that select no tests (-run '^$', as for benchmarks and fuzzing) get none: they only decode,
// and a fuzz worker per core each starting etcd and an API server would starve the machine.
func TestMain(m *testing.M) {
	flag.Parse()
	if flagValue("test.fuzzworker") == "true" || flagValue("test.run") == "^$" {
		os.Exit(m.Run())
	}
	os.Exit(testenv.Run(m, testenv.Options{}, &env))
}

func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// liveEnv returns the envtest environment; it exists whenever a test was selected to run.
func liveEnv(t *testing.T) *testenv.Env {
	t.Helper()
	if env == nil {
		t.Fatal("envtest is not running: TestMain skips it only for -run '^$' and fuzz workers")
	}
	return env
}
