// Package mgrtest runs the real manager, or the CAPVCO controllers in the test's own process,
// against a test environment and waits on what they do: the helpers the controller-level and
// real-node test suites share.
package mgrtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/manager"
	"github.com/capx-io/capx/internal/testenv"
)

// Start runs the real manager, built from its own flags (defaults, then the given ones),
// against the environment until the test ends.
func Start(t testing.TB, env *testenv.Env, flags ...string) {
	t.Helper()
	StartWith(t, env, env.Config, flags...)
}

// StartWith is Start reaching the API server with cfg (another identity, say).
func StartWith(t testing.TB, env *testenv.Env, cfg *rest.Config, flags ...string) {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	manager.AddFlags(fs)
	args := append([]string{"--runner-image=capx.test/manager:dev", "--metrics-bind-address=0", "--health-addr=0"}, flags...)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	v := viper.New()
	_ = v.BindPFlags(fs)
	opts, err := manager.Load(v)
	if err != nil {
		t.Fatal(err)
	}
	opts.SkipControllerNameValidation = true // every test starts its own manager
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := manager.New(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped with %v", err)
		}
	})
}

// WaitFor polls an object until ok holds; on timeout it fails with the object's conditions.
func WaitFor[T capi.Object](t testing.TB, env *testenv.Env, obj T, timeout time.Duration, what string, ok func(T) bool) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj) == nil && ok(obj)
	}, timeout, 200*time.Millisecond).Should(BeTrue(), func() string {
		return fmt.Sprintf("%T %s: want %s; conditions:\n%s", obj, obj.GetName(), what, Describe(obj))
	})
}

// Describe lists an object's conditions (and, with CAPX_TEST_DUMP set, the whole object).
func Describe(o capi.Object) string {
	var b strings.Builder
	if os.Getenv("CAPX_TEST_DUMP") != "" {
		if st, err := json.Marshal(o); err == nil {
			fmt.Fprintf(&b, "  object: %s\n", st)
		}
	}
	for _, c := range o.GetConditions() {
		fmt.Fprintf(&b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// Gone waits until an object no longer exists.
func Gone(t testing.TB, env *testenv.Env, o client.Object, timeout time.Duration) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o))
	}, timeout, 200*time.Millisecond).Should(BeTrue(), func() string {
		msg := fmt.Sprintf("%T %s still exists (finalizers %v)", o, o.GetName(), o.GetFinalizers())
		if c, ok := o.(capi.Object); ok {
			msg += "; conditions:\n" + Describe(c)
		}
		return msg
	})
}
