package runner

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/runresult"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/scheme"
)

// saveErroredState handles the state the runtime wrote to errored.tfstate because it could not
// save it to the backend (a state grown past what one Secret holds, an API server that went
// away): it pushes it with `state push` (no -force, so it never overwrites a newer state) and
// records the file's size and the push's outcome in the result. When the push fails too, what
// the step created is recorded nowhere the next run would read, so the run's failure becomes
// state-not-persisted, which the controller never retries. It runs even after a stop request,
// on a context of its own bounded by what is left of --stop-timeout.
func (r *run) saveErroredState(ctx context.Context, f *failure) *failure {
	path := filepath.Join(r.root, erroredState)
	st, err := os.Stat(path)
	if err != nil {
		return f
	}
	es := &runresult.ErroredState{Bytes: st.Size(), PushExitCode: -1}
	es.CompressedBytes, _ = compressedSize(path)
	r.res.ErroredState = es

	budget := r.o.stopTimeout
	r.stopMu.Lock()
	if !r.stoppedAt.IsZero() {
		budget -= time.Since(r.stoppedAt)
	}
	r.stopMu.Unlock()
	if budget <= 0 {
		r.logf("no time left to push %s", erroredState)
		es.PushError = "no time was left of --stop-timeout to push it"
		es.Kept, err = r.keepErroredState(ctx, path)
		if err != nil {
			es.KeepError = r.red.String(err.Error())
		}
		return r.notPersisted(f, es)
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	defer cancel()
	r.logf("pushing %s (%d bytes, %d compressed) left by the failed step", erroredState, es.Bytes, es.CompressedBytes)
	err = r.step(pctx, "push-errored-state", false, func(ctx context.Context) error {
		return r.tf.StatePush(ctx, path, tfexec.Lock(true), tfexec.LockTimeout(r.o.lockTimeout.String()))
	})
	es.PushExitCode = exitCode(err)
	if err == nil {
		r.logf("pushed %s: the backend holds the state the failed step left", erroredState)
		return f
	}
	out := r.tail.String()
	if out == "" {
		out = err.Error()
	}
	es.PushError = r.red.String(errorBlock(boxDrawing.Replace(r.red.String(out))))
	r.logf("could not push %s (exit code %d); the runtime's output above says why", erroredState, es.PushExitCode)
	if es.Kept, err = r.keepErroredState(ctx, path); err != nil {
		es.KeepError = r.red.String(err.Error())
		r.logf("could not keep %s in Secrets: %s; it is lost with the pod", erroredState, es.KeepError)
	} else {
		r.logf("kept %s as state backup %s", erroredState, es.Kept)
	}
	return r.notPersisted(f, es)
}

// notPersisted turns the step's failure into state-not-persisted: what happened, in what
// size, then the step's own first error.
func (r *run) notPersisted(f *failure, es *runresult.ErroredState) *failure {
	why := "the backend refused it"
	if es.TooLarge() {
		why = fmt.Sprintf("it is %s compressed and a state Secret holds at most %s", mib(es.CompressedBytes), mib(runresult.SecretDataLimit))
	}
	kept := "it was not kept (see erroredState.keepError)"
	if es.Kept != "" {
		kept = "a copy is kept as state backup " + es.Kept
	}
	summary := fmt.Sprintf("the state after step %s (%s, %s compressed) could not be saved: %s; the runner's push failed too (exit code %d). "+
		"What the step created is recorded only in that state (%s): do not re-run. %s",
		f.step, mib(es.Bytes), mib(es.CompressedBytes), why, es.PushExitCode, kept, f.summary)
	return &failure{kind: runresult.KindStateNotPersisted, step: f.step, summary: runresult.Head(summary, runresult.MaxSummaryBytes)}
}

// boxDrawing drops the frame OpenTofu draws around diagnostics of commands run without
// -no-color (state push).
var boxDrawing = strings.NewReplacer("│ ", "", "│", "", "╷", "", "╵", "")

// mib formats a byte count in MiB with two decimals.
func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// compressedSize is the file's size gzip-compressed, as the kubernetes backend stores it.
func compressedSize(path string) (int64, error) {
	in, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	var n countWriter
	zw := gzip.NewWriter(&n)
	if _, err := io.Copy(zw, in); err != nil {
		return 0, err
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	return int64(n), nil
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

// keepErroredState copies the errored state into a state backup set owned by the CAPTF object
// (--event-object), captf-state-backup-<suffix>-<serial>, chunked as the backend chunks a state (state.SnapshotOf):
// the same Secrets `kubectl captf backups list` shows and the restore path reads, so nothing the
// run created is forgotten once the pod is gone. It returns the set's name.
func (r *run) keepErroredState(ctx context.Context, path string) (string, error) {
	cfg := r.o.backend()
	if cfg.namespace == "" || cfg.suffix == "" {
		return "", fmt.Errorf("no namespace or secret_suffix among --backend-config")
	}
	owner, err := parseEventObject(r.o.eventObject)
	if err != nil || r.o.eventObject == "" {
		return "", fmt.Errorf("no owner to keep it for (--event-object): %v", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	// The backup carries the labels the state Secrets would (owner, cluster, clusterctl move).
	snap, err := state.SnapshotOf(cfg.namespace, cfg.suffix, gz.Bytes(), cfg.labels)
	if err != nil {
		return "", err
	}
	rc, err := cfg.restConfig()
	if err != nil {
		return "", err
	}
	c, err := client.New(rc, client.Options{Scheme: scheme.New()})
	if err != nil {
		return "", err
	}
	ref := metav1.OwnerReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return state.Backup(kctx, c, snap, ref, state.BackupOptions{Keep: state.MaxStatusBackups, SourceJob: r.o.jobName})
}

// backendSettings are the --backend-config values the runner itself needs.
type backendSettings struct {
	namespace, suffix, configPath string
	inCluster                     bool
	labels                        map[string]string // the labels= HCL map of string keys and values
}

// hclPair is one "key"="value" entry of the HCL map the controller passes as labels=.
var hclPair = regexp.MustCompile(`"([^"\\]*)"\s*=\s*"([^"\\]*)"`)

func (o *options) backend() backendSettings {
	var b backendSettings
	for _, kv := range o.backendConfig {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "namespace":
			b.namespace = v
		case "secret_suffix":
			b.suffix = v
		case "config_path":
			b.configPath = v
		case "in_cluster_config":
			b.inCluster = v == "true"
		case "labels":
			b.labels = map[string]string{}
			for _, m := range hclPair.FindAllStringSubmatch(v, -1) {
				b.labels[m[1]] = m[2]
			}
		}
	}
	return b
}

// restConfig connects as the backend does: in the cluster with the pod's ServiceAccount, else
// with the kubeconfig the backend was given.
func (b backendSettings) restConfig() (*rest.Config, error) {
	if b.inCluster || b.configPath == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", b.configPath)
}
