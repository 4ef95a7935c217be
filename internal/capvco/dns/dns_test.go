package dns_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/capx-io/capx/internal/capvco/dns"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

const domain = "api.c1.acme.example"

// held is a simulator whose first DNS write waits in the platform's slow phase until release
// is closed; inWrite is closed once it waits there.
type held struct {
	sim              *vcosim.Server
	api              *vco.Client
	cs               string
	inWrite, release chan struct{}
}

func newHeld(t *testing.T) *held {
	t.Helper()
	h := &held{inWrite: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	h.sim = vcosim.NewTestServer(t, vcosim.Options{DNSWriting: func(string) {
		once.Do(func() { close(h.inWrite); <-h.release })
	}})
	t.Cleanup(func() {
		select {
		case <-h.release:
		default:
			close(h.release)
		}
	})
	h.api = vcotest.Client(t, h.sim, vcosim.SeedClusterPrinc)
	cs, _, err := h.api.EnsureCloudspace(context.Background(), vco.CreateCloudspaceRequest{Name: "capvco_ns_c1_primary", Location: vcosim.SeedLocation})
	if err != nil {
		t.Fatal(err)
	}
	h.cs = cs.ID
	return h
}

func (h *held) records(t *testing.T) []vco.DNSRecord {
	recs, err := h.api.ListCloudspaceDNSRecords(context.Background(), h.cs)
	if err != nil && !errors.Is(err, vco.ErrNotFound) {
		t.Fatal(err)
	}
	return recs
}

// TestDeleteWaitsForItsCreate: a cluster deleted during its first DNS write asks for the
// record's delete while the create is still running. The delete is not done then (the record
// is not there yet, but the create will put it there); it runs once the create ends and is done
// only when the record is gone. (Today's HEAD, 4d97e0c, reported the delete done at once and
// left the record behind.)
func TestDeleteWaitsForItsCreate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	h := newHeld(t)
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w := dns.NewWriter(clocktesting.NewFakePassiveClock(started))
	ended := make(chan struct{}, 4)
	notify := func() { ended <- struct{}{} }

	p, err := w.Ensure(ctx, h.api, h.cs, domain, notify)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Done).To(BeFalse())
	<-h.inWrite // the create is in the platform's slow write

	p, err = w.Delete(ctx, h.api, h.cs, domain, notify)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Done).To(BeFalse(), "the delete reported done while its record's create was running")
	g.Expect(p.Since).To(Equal(started), "the write under way is reported, started at the writer's clock")

	close(h.release)
	g.Eventually(func() bool {
		p, err := w.Delete(ctx, h.api, h.cs, domain, notify)
		g.Expect(err).NotTo(HaveOccurred())
		return p.Done
	}, 30*time.Second, 10*time.Millisecond).Should(BeTrue())
	g.Expect(h.records(t)).To(BeEmpty(), "done, and the record is gone")
	for _, r := range h.sim.Snapshot().DNSRecords {
		t.Errorf("the simulator still holds %s %s", r.Domain, r.Type)
	}
}

// TestEnsureAgainDropsTheQueuedDelete: asked back before the queued delete started, the
// record's create stands and nothing deletes it afterwards.
func TestEnsureAgainDropsTheQueuedDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	h := newHeld(t)
	w := dns.NewWriter(clock.RealClock{})
	_, err := w.Ensure(ctx, h.api, h.cs, domain, nil)
	g.Expect(err).NotTo(HaveOccurred())
	<-h.inWrite
	_, err = w.Delete(ctx, h.api, h.cs, domain, nil)
	g.Expect(err).NotTo(HaveOccurred())
	p, err := w.Ensure(ctx, h.api, h.cs, domain, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Done).To(BeFalse())
	close(h.release)
	g.Eventually(func() bool {
		p, err := w.Ensure(ctx, h.api, h.cs, domain, nil)
		g.Expect(err).NotTo(HaveOccurred())
		return p.Done
	}, 30*time.Second, 10*time.Millisecond).Should(BeTrue())
	g.Consistently(func() int { return len(h.records(t)) }, 300*time.Millisecond, 20*time.Millisecond).Should(Equal(1),
		"the record stays: no delete ran after the create")
}
