package install

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Wait polls check every second until it reports done, printing its progress note every 15 s,
// and fails after timeout with the last note and error.
func (m *Management) Wait(ctx context.Context, what string, timeout time.Duration, check func(ctx context.Context) (done bool, note string, err error)) error {
	start := time.Now()
	lastReport := start
	m.logf("waiting for %s", what)
	var note string
	var err error
	for {
		var done bool
		done, note, err = check(ctx)
		if done && err == nil {
			m.logf("%s: ok after %.1fs", what, time.Since(start).Seconds())
			return nil
		}
		if err != nil {
			note = err.Error()
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("timed out after %s waiting for %s: %s", timeout, what, note)
		}
		if time.Since(lastReport) >= 15*time.Second {
			m.logf("still waiting for %s (%.0fs): %s", what, time.Since(start).Seconds(), note)
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (%s)", what, ctx.Err(), note)
		case <-time.After(time.Second):
		}
	}
}

// WaitProviders waits until the Cluster API core and capx managers are available: rolled out,
// with their readiness probes passing (CAPI's includes its webhook server).
func (m *Management) WaitProviders(ctx context.Context) error {
	return m.WaitDeployments(ctx, 5*time.Minute,
		client.ObjectKey{Namespace: CoreNamespace, Name: "capi-controller-manager"},
		client.ObjectKey{Namespace: ProviderNamespace, Name: "capx-controller-manager"})
}

// WaitDeployments waits until every Deployment has rolled out and is available.
func (m *Management) WaitDeployments(ctx context.Context, timeout time.Duration, keys ...client.ObjectKey) error {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.String()
	}
	return m.Wait(ctx, "deployments "+strings.Join(names, ", "), timeout, func(ctx context.Context) (bool, string, error) {
		var notes []string
		for _, k := range keys {
			d := &appsv1.Deployment{}
			if err := m.Client.Get(ctx, k, d); err != nil {
				return false, "", err
			}
			if !rolledOut(d) {
				notes = append(notes, k.Name+": "+m.podNotes(ctx, d))
			}
		}
		return len(notes) == 0, strings.Join(notes, "; "), nil
	})
}

func rolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want
}

// podNotes summarises a Deployment's pods for progress lines: phase, waiting reasons, restarts.
func (m *Management) podNotes(ctx context.Context, d *appsv1.Deployment) string {
	pods := &corev1.PodList{}
	if err := m.Client.List(ctx, pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		return err.Error()
	}
	if len(pods.Items) == 0 {
		return "no pods yet"
	}
	var notes []string
	for _, p := range pods.Items {
		n := string(p.Status.Phase)
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			switch {
			case cs.State.Waiting != nil:
				n += fmt.Sprintf(" %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, firstLine(cs.State.Waiting.Message))
			case cs.State.Terminated != nil:
				n += fmt.Sprintf(" %s terminated: %s", cs.Name, cs.State.Terminated.Reason)
			case !cs.Ready:
				n += " " + cs.Name + " not ready"
			}
			if cs.RestartCount > 0 {
				n += fmt.Sprintf(" (%d restarts)", cs.RestartCount)
			}
		}
		notes = append(notes, p.Name+" "+n)
	}
	sort.Strings(notes)
	return strings.Join(notes, ", ")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// isNoKind reports an error saying the API server does not serve a kind (its CRD is missing).
func isNoKind(err error) bool {
	var noMatch *meta.NoKindMatchError
	return meta.IsNoMatchError(err) || errors.As(err, &noMatch) || apierrors.IsNotFound(err)
}
