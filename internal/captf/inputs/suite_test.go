package inputs

import (
	"context"
	"flag"
	"os"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/capx-io/capx/internal/testenv"
)

var env *testenv.Env

// TestMain starts one API server for the package, except for fuzzing (`go test -fuzz`), whose
// targets need none and whose worker processes would each start their own.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run())
	}
	os.Exit(testenv.Run(m, testenv.Options{}, &env))
}

// writes counts the API writes made through a client.
type writes struct {
	mu  sync.Mutex
	ops []string
}

func (w *writes) add(op string, obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ops = append(w.ops, op+" "+obj.GetName())
}

func (w *writes) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ops := w.ops
	w.ops = nil
	return ops
}

// countingClient is the test API server's client with every write recorded.
func countingClient(t *testing.T) (client.Client, *writes) {
	t.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w := &writes{}
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.add("create", obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.add("update", obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.add("patch", obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.add("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
	}), w
}
