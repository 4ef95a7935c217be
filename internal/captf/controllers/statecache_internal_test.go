package controllers

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/outputs"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/scheme"
)

// countingReader counts the whole-Secret lists (state fetches) made through it, and can hold
// each one until released, to watch how many run at once.
type countingReader struct {
	client.Reader
	lists, inFlight, maxInFlight atomic.Int32
	hold                         chan struct{}
}

func (c *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.SecretList); ok {
		c.lists.Add(1)
		n := c.inFlight.Add(1)
		defer c.inFlight.Add(-1)
		for {
			m := c.maxInFlight.Load()
			if n <= m || c.maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		if c.hold != nil {
			<-c.hold
		}
	}
	return c.Reader.List(ctx, list, opts...)
}

func stateSecret(ns, suffix string, serial int) *corev1.Secret {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	fmt.Fprintf(zw, `{"version":4,"serial":%d,"lineage":"l-1","outputs":{"provider_id":{"value":"p-%d","type":"string"}},"resources":[]}`, serial, serial)
	_ = zw.Close()
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: contract.StateSecretName(suffix), Labels: map[string]string{
			contract.BackendStateLabel: "true", contract.BackendSuffixLabel: suffix,
		}},
		Data: map[string][]byte{contract.BackendStateKey: gz.Bytes()},
	}
}

// TestStateCacheDecodesOncePerChange (issue 9): a state is fetched and decoded again only when
// one of its Secrets changed; in between, the facts and the mapped outputs are reused, and the
// cache keeps neither the state's data nor its output values.
func TestStateCacheDecodesOncePerChange(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns, suffix = "ns", "0123456789abcdef-m"
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(stateSecret(ns, suffix, 1)).Build()
	live := &countingReader{Reader: c}
	cache := newStateCache(nil)
	mapped := 0
	mapOutputs := func(m map[string]state.Output) *outputs.Result {
		mapped++
		return outputs.Decode(contract.RoleMachine, m, outputs.Options{})
	}

	for i := range 5 {
		snap, fresh, err := cache.read(ctx, c, live, ns, suffix)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(snap.Serial).To(BeEquivalentTo(1))
		g.Expect(fresh).To(Equal(i == 0))
		out, err := cache.outputs(ctx, live, snap, outputs.Options{}, mapOutputs)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.ProviderID).To(Equal("p-1"))
	}
	g.Expect(live.lists.Load()).To(BeEquivalentTo(1), "decoded once")
	g.Expect(mapped).To(Equal(1), "outputs mapped once")
	kept := cache.entries[ns+"/"+suffix].snap
	g.Expect(kept.Compacted()).To(BeTrue())
	g.Expect(kept.Outputs).To(BeNil(), "no output values are kept")

	// The backend writes serial 2: read again, once.
	g.Expect(c.Update(ctx, stateSecret(ns, suffix, 2))).To(Succeed())
	for range 3 {
		snap, _, err := cache.read(ctx, c, live, ns, suffix)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(snap.Serial).To(BeEquivalentTo(2))
	}
	g.Expect(live.lists.Load()).To(BeEquivalentTo(2))
}

// TestStateCacheBoundsConcurrentDecodes (issue 9): however many reconciles read states at once,
// at most decodeConcurrency fetches and decodes run together.
func TestStateCacheBoundsConcurrentDecodes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := fake.NewClientBuilder().WithScheme(scheme.New())
	const n = 10
	for i := range n {
		b = b.WithObjects(stateSecret("ns", fmt.Sprintf("%016x-m", i), 1))
	}
	c := b.Build()
	live := &countingReader{Reader: c, hold: make(chan struct{})}
	cache := newStateCache(nil)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, _, err := cache.read(ctx, c, live, "ns", fmt.Sprintf("%016x-m", i))
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
	g.Eventually(live.inFlight.Load, time.Second).Should(BeEquivalentTo(decodeConcurrency))
	g.Consistently(live.inFlight.Load, 200*time.Millisecond).Should(BeEquivalentTo(decodeConcurrency))
	close(live.hold)
	wg.Wait()
	g.Expect(live.maxInFlight.Load()).To(BeEquivalentTo(decodeConcurrency))
	g.Expect(live.lists.Load()).To(BeEquivalentTo(n))
}
