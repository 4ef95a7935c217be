package runner_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/runresult"
	"github.com/capx-io/capx/internal/captf/state"
)

// bigStateModule is module code whose state outgrows a Secret: count resources whose input
// (stored twice in the state, as input and output) is hex that compresses about 2:1.
func bigStateModule(count, hashes int) string {
	return fmt.Sprintf(`
resource "terraform_data" "bulk" {
  count = %d
  input = join("", [for i in range(%d) : sha512("${count.index}-${i}")])
}
`, count, hashes)
}

// TestStateTooLargeIsNotPersisted: a real OpenTofu apply whose state outgrows the one Secret the
// kubernetes backend writes. The runner's push of errored.tfstate fails the same way; the result
// says the state was not persisted (never a plain step failure the controller would retry), how
// large it is, that the push failed, and quotes the first error (the cause), not OpenTofu's
// closing advice to push a file that is gone with the pod.
func TestStateTooLargeIsNotPersisted(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	f := newFixture(t, "cluster")
	// 24 x 64 KiB of hex input, twice in the state (3 MiB): about 1.6 MiB compressed.
	must(t, os.WriteFile(filepath.Join(f.dir, "module", "bulk.tf"), []byte(bigStateModule(24, 512)), 0o644))
	ctx := context.Background()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "obj0"}}
	must(t, env.Client.Create(ctx, owner))
	o := f.run(ctx, "apply", "--job-name=tfc-obj0-apply-1",
		`--backend-config=labels={"captf.io/managed"="true","clusterctl.cluster.x-k8s.io/move"="","captf.io/cluster-name"="c0"}`,
		"--event-object=v1/ConfigMap/"+f.ns+"/obj0/"+string(owner.UID))
	t.Logf("result: %s", o.raw)
	g.Expect(o.code).To(Equal(1), o.log)
	e := o.res.Error
	g.Expect(e).NotTo(BeNil())
	g.Expect(e.Kind).To(Equal(runresult.KindStateNotPersisted), o.raw)
	g.Expect(e.Step).To(Equal("apply"))
	g.Expect(e.Summary).To(ContainSubstring("a state Secret holds at most 1.00 MiB"))
	g.Expect(e.Summary).To(ContainSubstring("do not re-run"))
	g.Expect(e.Summary).To(ContainSubstring("a copy is kept as state backup captf-state-backup-" + f.suffix + "-"))
	g.Expect(e.Summary).To(ContainSubstring("Error: Failed to save state"), "the first error block is the cause")
	g.Expect(e.Summary).NotTo(ContainSubstring("state push errored.tfstate"), "OpenTofu's advice names a file gone with the pod")

	es := o.res.ErroredState
	g.Expect(es).NotTo(BeNil(), o.raw)
	g.Expect(es.TooLarge()).To(BeTrue(), o.raw)
	g.Expect(es.Bytes).To(BeNumerically(">", es.CompressedBytes))
	g.Expect(es.PushExitCode).To(Equal(1), "the push of the errored state fails the same way")
	g.Expect(es.PushError).To(HavePrefix("Error: "))
	last := o.res.Steps[len(o.res.Steps)-1]
	g.Expect(last.Name).To(Equal("push-errored-state"))
	g.Expect(f.state(ctx)["resources"]).To(BeEmpty(), "nothing of the applied state reached the backend")

	// The errored state is kept as a state backup of the object, chunked below a Secret's
	// limit, which the backups commands and the restore path read.
	g.Expect(es.KeepError).To(BeEmpty())
	sets, err := state.Backups(ctx, env.Client, f.ns, f.suffix)
	must(t, err)
	g.Expect(sets).To(HaveLen(1))
	set := sets[0]
	g.Expect(es.Kept).To(Equal(set.Name))
	g.Expect(set.Complete).To(BeTrue())
	g.Expect(set.Chunks).To(HaveLen(2), "1.6 MiB compressed in chunks under 1 MiB")
	g.Expect(set.Resources).To(Equal(4), "resource blocks: the bulk one and the cluster module's three")
	g.Expect(set.SourceJob).To(Equal("tfc-obj0-apply-1"))
	raw, err := os.ReadFile(filepath.Join(f.dir, "work", "root", "errored.tfstate"))
	must(t, err)
	var joined []byte
	for _, name := range set.Chunks {
		s := &corev1.Secret{}
		must(t, env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, s))
		g.Expect(s.OwnerReferences).To(ConsistOf(HaveField("UID", owner.UID)))
		g.Expect(s.Labels).To(HaveKeyWithValue("captf.io/cluster-name", "c0"), "the backend's labels")
		joined = append(joined, s.Data[contract.BackendStateKey]...)
	}
	zr, err := gzip.NewReader(bytes.NewReader(joined))
	must(t, err)
	kept, err := io.ReadAll(zr)
	must(t, err)
	g.Expect(kept).To(Equal(raw), "the kept copy is the errored state, byte for byte")

	// The run reports the changes it made, although OpenTofu printed no summary line: every
	// resource instance the unsaved state holds was created by it.
	var errored struct {
		Resources []struct {
			Mode      string            `json:"mode"`
			Instances []json.RawMessage `json:"instances"`
		} `json:"resources"`
	}
	must(t, json.Unmarshal(raw, &errored))
	created := 0
	for _, r := range errored.Resources {
		if r.Mode == "managed" {
			created += len(r.Instances)
		}
	}
	g.Expect(created).To(BeNumerically(">", 24))
	g.Expect(o.res.Changes).To(Equal(&runresult.Changes{Add: created}), o.raw)
}
