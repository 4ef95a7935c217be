package mgrtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/capx-io/capx/internal/capvco/controllers"
	"github.com/capx-io/capx/internal/testenv"
)

// failureErrors is how many of a run's last error lines a failed test logs.
const failureErrors = 30

// CAPVCO is the CAPVCO controllers running in the test's own process, set up as the manager
// sets them up (controllers.Setup) with what only a test injects (a platform factory, a
// prober, add-on images), in a manager of their own. A test may stop them and start others
// on the same API server: a restarted or upgraded manager.
type CAPVCO struct {
	t    testing.TB
	logs *testenv.SyncBuffer
	// from is where this run's lines start in logs (a buffer shared by several runs).
	from int
	once sync.Once
	stop func() error
}

// CAPVCOOptions are how the test's controllers differ from the shipped manager's.
type CAPVCOOptions struct {
	// Config reaches the API server; nil means the environment's.
	Config *rest.Config
	// Namespace, when set, is the only namespace the manager's cache watches.
	Namespace string
	// Verbosity is the highest log level kept (funcr's).
	Verbosity int
	// Logs receives every log line kept, one a line, for the test to read; nil keeps them for
	// the failure report only.
	Logs *testenv.SyncBuffer
	// Controllers are controllers.Setup's options.
	Controllers controllers.Options
}

// StartCAPVCO runs the CAPVCO controllers until Stop or the end of the test. Stopping fails
// the test if the manager ended with an error; if the test has failed by then, it logs the
// last error lines of this run.
func StartCAPVCO(t testing.TB, env *testenv.Env, o CAPVCOOptions) *CAPVCO {
	t.Helper()
	cfg := o.Config
	if cfg == nil {
		cfg = env.Config
	}
	c := &CAPVCO{t: t, logs: o.Logs}
	if c.logs == nil {
		c.logs = &testenv.SyncBuffer{}
	}
	c.from = len(c.logs.String())
	mgrOpts := ctrl.Options{
		Logger:     funcr.New(func(prefix, args string) { fmt.Fprintln(c.logs, prefix, args) }, funcr.Options{Verbosity: o.Verbosity}),
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}, // every run registers the same names
	}
	if o.Namespace != "" {
		mgrOpts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{o.Namespace: {}}}
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		t.Fatalf("CAPVCO controllers' manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := controllers.Setup(ctx, mgr, o.Controllers); err != nil {
		cancel()
		t.Fatalf("CAPVCO controllers: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	c.stop = func() error {
		cancel()
		return <-done
	}
	t.Cleanup(c.Stop)
	return c
}

// Stop stops the controllers and waits until they have; once stopped, it does nothing.
func (c *CAPVCO) Stop() {
	c.t.Helper()
	c.once.Do(func() {
		if err := c.stop(); err != nil {
			c.t.Errorf("CAPVCO controllers stopped with %v", err)
		}
		if c.t.Failed() {
			c.t.Logf("CAPVCO controllers' errors (last %d of this run):\n%s", failureErrors, c.errors(failureErrors))
		}
	})
}

// errors is the last n lines of this run that log an error.
func (c *CAPVCO) errors(n int) string {
	var out []string
	for _, l := range strings.Split(c.logs.String()[c.from:], "\n") {
		if strings.Contains(l, `"error"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out[max(0, len(out)-n):], "\n")
}

// Create creates o, retrying for up to a minute while the API server's calls to Cluster API's
// webhooks are refused: they start with its manager, in the background of testenv.Run.
func Create(t testing.TB, env *testenv.Env, o client.Object) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := env.Client.Create(context.Background(), o)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "connection refused") || time.Now().After(deadline) {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
