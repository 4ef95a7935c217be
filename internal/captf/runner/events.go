package runner

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// reporter posts a run's progress as events.k8s.io Events on the CAPTF object, with the Job as
// the related object, so `kubectl describe` of the object shows a long apply moving. Events are
// best effort: a failure to post one is logged once and never fails the run. Notes name steps,
// durations and counts only, never output.
type reporter struct {
	client    kubernetes.Interface
	regarding corev1.ObjectReference
	related   *corev1.ObjectReference
	instance  string

	once sync.Once
	log  func(format string, args ...any)
}

// newReporter parses --event-object=<apiVersion>/<kind>/<namespace>/<name>/<uid> and connects
// with the pod's ServiceAccount (or the KUBECONFIG of environ outside a cluster). It returns nil,
// and reports nothing, when no object is given or no API server can be reached.
func newReporter(object, job string, environ []string, log func(string, ...any)) (*reporter, error) {
	if object == "" {
		return nil, nil
	}
	ref, err := parseEventObject(object)
	if err != nil {
		return nil, err
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		kubeconfig := ""
		for _, kv := range environ {
			if v, ok := strings.CutPrefix(kv, "KUBECONFIG="); ok {
				kubeconfig = v
			}
		}
		if kubeconfig == "" {
			return nil, nil
		}
		if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
			return nil, nil
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil
	}
	host, _ := os.Hostname()
	r := &reporter{client: cs, regarding: ref, instance: host, log: log}
	if job != "" {
		r.related = &corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: ref.Namespace, Name: job}
	}
	return r, nil
}

// parseEventObject parses --event-object=<apiVersion>/<kind>/<namespace>/<name>/<uid>.
func parseEventObject(object string) (corev1.ObjectReference, error) {
	parts := strings.Split(object, "/")
	if len(parts) < 5 {
		return corev1.ObjectReference{}, fmt.Errorf("--event-object=%q: want <apiVersion>/<kind>/<namespace>/<name>/<uid>", object)
	}
	n := len(parts)
	return corev1.ObjectReference{
		APIVersion: strings.Join(parts[:n-4], "/"), Kind: parts[n-4], Namespace: parts[n-3],
		Name: parts[n-2], UID: types.UID(parts[n-1]),
	}, nil
}

// emit posts one Event; a nil reporter posts nothing.
func (r *reporter) emit(ctx context.Context, typ, reason, note string) {
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	now := metav1.NowMicro()
	ev := &eventsv1.Event{
		// Named as client-go's recorders name events (generateName refuses a trailing dot).
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", r.regarding.Name, now.UnixNano()), Namespace: r.regarding.Namespace},
		EventTime:           now,
		ReportingController: "captf.io/runner",
		ReportingInstance:   r.instance,
		Action:              "Run",
		Reason:              reason,
		Regarding:           r.regarding,
		Related:             r.related,
		Note:                note,
		Type:                typ,
	}
	if _, err := r.client.EventsV1().Events(r.regarding.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		r.once.Do(func() { r.log("could not post progress events (continuing without them): %v", err) })
	}
}
