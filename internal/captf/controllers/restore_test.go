package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/state"
)

// stateLog records every distinct state an object's Secrets held, polling fast enough to see
// the short-lived ones (a restored state lives until the re-apply after it).
type stateLog struct {
	mu   sync.Mutex
	seen []state.Snapshot
}

func recordStates(t *testing.T, ns, kind, name string) *stateLog {
	ctx, cancel := context.WithCancel(context.Background())
	l := &stateLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		suffix := contract.StateSuffix(ns, kind, name)
		for ctx.Err() == nil {
			if s, err := state.Read(ctx, env.Client, ns, suffix); err == nil {
				l.mu.Lock()
				if n := len(l.seen); n == 0 || l.seen[n-1].Digest != s.Digest || l.seen[n-1].InputsHash != s.InputsHash {
					l.seen = append(l.seen, *s)
				}
				l.mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

func (l *stateLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, s := range l.seen {
		fmt.Fprintf(&b, "\n  serial %d lineage %s inputs %q digest %.8s", s.Serial, s.Lineage, s.InputsHash, s.Digest)
	}
	return b.String()
}

func (l *stateLog) saw(ok func(state.Snapshot) bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.seen, ok)
}

// TestRestore: a requested restore of a backed-up serial runs a restore Job that pushes the
// backup back (lineage, contents and applied inputs hash are the backup's; the serial is a
// new one, so no serial ever names two states), reports
// RestoreJobSucceeded=True/StateRestored and status.lastRestoredSerial, and a cluster whose
// current inputs differ from the restored ones re-applies them. A serial without a backup
// starts nothing (RestoreBackupNotFound), nor does a backup whose data is not what its
// annotations record (RestoreBackupInvalid).
func TestRestore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := scenario(t)
	const kind = captfv1.KindCluster
	suffix := contract.StateSuffix(ns, kind, "c1")
	restores := func() int { return countJobs(t, ns, kind, "c1", captfv1.OperationRestore) }

	tc := newTerraformCluster(t, ns, "c1", nil)
	unblocked := watchBlockMove(t, tc, kind)
	waitFor(t, tc, 2*time.Minute, "provisioned", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization) && o.Status.ActiveJob == nil
	})
	first := readState(t, ns, kind, "c1")

	// A second apply writes a new serial; both are backed up.
	update(t, tc, func(o *captfv1.TerraformCluster) {
		o.Spec.Variables = vars(map[string]any{"failure_domains": []string{"fd-a", "fd-b", "fd-c"}})
	})
	var second *state.Snapshot
	waitFor(t, tc, 2*time.Minute, "the change applied and backed up", func(o *captfv1.TerraformCluster) bool {
		if o.Status.ActiveJob != nil || o.Status.AppliedInputsHash == first.InputsHash {
			return false
		}
		second = readState(t, ns, kind, "c1")
		return backedUp(o, first.Serial) && backedUp(o, second.Serial)
	})
	g.Expect(second.Serial).To(BeNumerically(">", first.Serial))

	// A serial with no backup starts nothing.
	annotate(t, tc, captfv1.RestoreStateAnnotation, ptr.To("999"))
	waitFor(t, tc, time.Minute, "no backup of serial 999", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.RestoreJobSucceededCondition, metav1.ConditionFalse, captfv1.RestoreBackupNotFoundReason)
	})
	never(t, 3*time.Second, "a restore Job started without a backup", func() bool { return restores() > 0 })

	// A damaged backup fails its restore, once. (Backups are immutable Secrets, but anything
	// that may write Secrets in the namespace, a module included, can replace one.)
	damaged, err := state.FindBackup(ctx, env.Client, ns, suffix, second.Serial)
	g.Expect(err).NotTo(HaveOccurred())
	original := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: damaged.Chunks[0]}, original)).To(Succeed())
	g.Eventually(func() error {
		// The manager backs the current serial up again when it sees the set incomplete between
		// the delete and the create; the replacement is then tried again.
		chunk := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(original), chunk); err == nil {
			if string(chunk.Data[contract.BackendStateKey]) == "not a gzip stream" {
				return nil
			}
			if err := env.Client.Delete(ctx, chunk); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		chunk = original.DeepCopy()
		chunk.ResourceVersion, chunk.UID = "", ""
		chunk.Data[contract.BackendStateKey] = []byte("not a gzip stream")
		if err := env.Client.Create(ctx, chunk); err != nil {
			return err
		}
		return errors.New("replaced; checking")
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	// The manager reads the backup's data before it starts a Job (issue 9): the annotations
	// alone, which anyone who may write Secrets can write, are not trusted. Nothing runs.
	annotate(t, tc, captfv1.RestoreStateAnnotation, ptr.To(strconv.FormatInt(second.Serial, 10)))
	waitFor(t, tc, time.Minute, "the damaged backup refused", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.RestoreJobSucceededCondition, metav1.ConditionFalse, captfv1.RestoreBackupInvalidReason)
	})
	g.Expect(describe(tc)).To(And(ContainSubstring("digest"), ContainSubstring("nothing was restored")))
	never(t, 4*time.Second, "a restore Job started with a damaged backup", func() bool { return restores() > 0 })
	g.Expect(readState(t, ns, kind, "c1").Digest).To(Equal(second.Digest), "the state is left alone")
	annotate(t, tc, captfv1.RestoreStateAnnotation, nil)

	// Restoring the first serial pushes that backup back, then the current inputs re-apply.
	seen := recordStates(t, ns, kind, "c1")
	annotate(t, tc, captfv1.RestoreStateAnnotation, ptr.To(strconv.FormatInt(first.Serial, 10)))
	waitFor(t, tc, 2*time.Minute, "restored", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.RestoreJobSucceededCondition, metav1.ConditionTrue, captfv1.StateRestoredReason) &&
			ptr.Deref(o.Status.LastRestoredSerial, -1) == first.Serial
	})
	g.Expect(restores()).To(Equal(1))
	// The restored state is the backup's (lineage, contents, applied inputs hash) under a serial
	// the backend never held before (runner.restoreOp says why it is not the backup's own).
	fds := string(first.Outputs["failure_domains"].Value)
	g.Eventually(func() bool {
		return seen.saw(func(s state.Snapshot) bool {
			return s.Serial > second.Serial && s.Lineage == first.Lineage && s.InputsHash == first.InputsHash &&
				s.Resources == first.Resources && string(s.Outputs["failure_domains"].Value) == fds
		})
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue(), func() string {
		return fmt.Sprintf("the backup (serial %d, lineage %s, inputs hash %s) was not restored over serial %d; seen: %s",
			first.Serial, first.Lineage, first.InputsHash, second.Serial, seen)
	})

	waitFor(t, tc, 2*time.Minute, "the current inputs re-applied over the restored state", func(o *captfv1.TerraformCluster) bool {
		if o.Status.ActiveJob != nil {
			return false
		}
		s := readState(t, ns, kind, "c1")
		return s.InputsHash == second.InputsHash && s.Serial > first.Serial && s.Lineage == first.Lineage && len(o.Status.FailureDomains) == 3
	})
	g.Expect(restores()).To(Equal(1), "a restore runs once per request")
	g.Expect(unblocked()).To(BeEmpty(), "Jobs ran without block-move (the re-apply starts in the pass that records the restore)")
}
