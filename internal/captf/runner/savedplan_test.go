package runner_test

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/planhash"
	"github.com/capx-io/capx/internal/captf/runresult"
	"github.com/capx-io/capx/internal/captf/savedplan"
)

// object creates the stand-in (a ConfigMap) for the CAPTF object a Job runs for, once, and
// returns the flags that name it and the Job job, as the controller passes them: the runner
// stores plans for that object's TerraformPlans.
func (f *fixture) object(ctx context.Context, job string) []string {
	f.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "obj0"}, cm); err != nil {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "obj0"}}
		must(f.t, env.Client.Create(ctx, cm))
	}
	if !slices.Contains(f.environ, "KUBECONFIG="+env.KubeconfigPath) {
		f.environ = append(f.environ, "KUBECONFIG="+env.KubeconfigPath) // stands for the Pod's ServiceAccount
	}
	return []string{"--job-name=" + job, "--event-object=v1/ConfigMap/" + f.ns + "/obj0/" + string(cm.UID)}
}

// approval is what the manager does with a stored plan when someone approves it: it reads the
// saved plan Secrets, hashes them with the object's key (bound to the state the plan file was
// made against, the inputs and the plan file), and gives the approved apply the chunks and the
// digest it verified.
type approval struct {
	hash   string
	digest string
	chunks int
	prior  savedplan.Prior
	bundle *savedplan.Bundle
	owner  metav1.OwnerReference
}

func (f *fixture) approve(ctx context.Context, job, inputsHash string) approval {
	f.t.Helper()
	name := savedplan.PlanName("obj0", job)
	first := &corev1.Secret{}
	must(f.t, env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: savedplan.SecretName(name)}, first))
	n, err := savedplan.Chunks(first)
	must(f.t, err)
	secrets := []*corev1.Secret{first}
	for i := 1; i < n; i++ {
		s := &corev1.Secret{}
		must(f.t, env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: savedplan.ChunkName(name, i)}, s))
		secrets = append(secrets, s)
	}
	b, digest, err := savedplan.Decode(name, secrets)
	must(f.t, err)
	prior, err := savedplan.PriorState(b.PlanFile)
	must(f.t, err)
	plan, err := planhash.Parse(b.Plan)
	must(f.t, err)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	hash, err := planhash.Fingerprint(key, plan, planhash.Binding{
		Lineage: prior.Lineage, Serial: prior.Serial, InputsHash: inputsHash, PlanFile: b.PlanFileDigest()})
	must(f.t, err)
	dir := filepath.Join(f.dir, "config", contract.SavedPlanDir)
	must(f.t, os.RemoveAll(dir))
	must(f.t, os.MkdirAll(dir, 0o755))
	for i, s := range secrets {
		must(f.t, os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), s.Data[savedplan.DataKey], 0o644))
	}
	return approval{hash: hash, digest: digest, chunks: n, prior: prior, bundle: b, owner: first.OwnerReferences[0]}
}

// giveSavedPlan hands the next approved apply bundle as its saved plan, as the manager would
// after verifying a plan approved as hash.
func (f *fixture) giveSavedPlan(b *savedplan.Bundle, hash string) approval {
	f.t.Helper()
	secrets, err := savedplan.Encode(b, "forged", f.ns, nil)
	must(f.t, err)
	dir := filepath.Join(f.dir, "config", contract.SavedPlanDir)
	must(f.t, os.RemoveAll(dir))
	must(f.t, os.MkdirAll(dir, 0o755))
	for i, s := range secrets {
		must(f.t, os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), s.Data[savedplan.DataKey], 0o644))
	}
	return approval{hash: hash, digest: secrets[0].Annotations[savedplan.DigestAnnotation], chunks: len(secrets), bundle: b}
}

// events lists the Events posted on the object, as "<type> <reason> <note>".
func (f *fixture) events(ctx context.Context) []string {
	f.t.Helper()
	list := &corev1.EventList{}
	must(f.t, env.Client.List(ctx, list, client.InNamespace(f.ns)))
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == "obj0" {
			out = append(out, e.Type+" "+e.Reason+" "+e.Message)
		}
	}
	return out
}

// gutModule replaces the cluster module with one that declares the same inputs and outputs but
// no resource (its plan deletes every resource), until the returned func puts it back.
func (f *fixture) gutModule() (restore func()) {
	f.t.Helper()
	dir := filepath.Join(f.dir, "module")
	saved := map[string][]byte{}
	for _, name := range []string{"main.tf", "outputs.tf"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		must(f.t, err)
		saved[name] = b
	}
	must(f.t, os.WriteFile(filepath.Join(dir, "main.tf"), []byte(`locals {
  endpoint = { host = "gone.capx.test", port = 6443 }
}
`), 0o644))
	must(f.t, os.WriteFile(filepath.Join(dir, "outputs.tf"), []byte(`output "control_plane_endpoint" { value = local.endpoint }
output "failure_domains" { value = [] }
output "exports" { value = {} }
output "health" { value = { state = "running", healthy = true, message = "", reasons = [] } }
`), 0o644))
	return func() {
		for name, b := range saved {
			must(f.t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
		}
	}
}

func (a approval) flags() []string {
	return []string{"--expect-plan=" + a.hash, "--saved-plan-chunks=" + strconv.Itoa(a.chunks), "--saved-plan-digest=" + a.digest}
}

// hasSavedPlan reports whether the Job stored a saved plan.
func (f *fixture) hasSavedPlan(ctx context.Context, job string) bool {
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: savedplan.SecretName(savedplan.PlanName("obj0", job))}, &corev1.Secret{})
	return err == nil
}

// moveState writes the state again under the next serial, with the same lineage and contents:
// what any other run that saved the state (a refresh, a drift check) leaves behind.
func (f *fixture) moveState(ctx context.Context) {
	f.t.Helper()
	f.editState(ctx, func(map[string]any) {})
}

// TestPlanStoresTheSavedPlan: a plan Job stores its plan file and show -json document for the
// TerraformPlan, owned by the object and carrying clusterctl's move label like the state; the
// plan file's prior state is the state the plan was made against.
func TestPlanStoresTheSavedPlan(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, "cluster")
	f.run(ctx, "apply").ok(t)
	st := f.state(ctx)

	f.vars["network_cidr"] = "10.1.0.0/16"
	o := f.run(ctx, "plan", f.object(ctx, "tfc-obj0-plan-1")...).ok(t)
	g.Expect(o.res.Destructive).To(BeTrue())
	a := f.approve(ctx, "tfc-obj0-plan-1", "h2:two")
	g.Expect(a.prior).To(Equal(savedplan.Prior{Lineage: st["lineage"].(string), Serial: int64(st["serial"].(float64))}))
	g.Expect(a.owner.Kind).To(Equal("ConfigMap"))
	g.Expect(a.hash).To(HavePrefix(planhash.Prefix))
	first := &corev1.Secret{}
	must(t, env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: savedplan.SecretName(savedplan.PlanName("obj0", "tfc-obj0-plan-1"))}, first))
	g.Expect(first.Labels).To(HaveKey("clusterctl.cluster.x-k8s.io/move"))
	g.Expect(first.Labels).To(HaveKeyWithValue(savedplan.Label, "true"))
	g.Expect(o.log).To(ContainSubstring("stored the saved plan for TerraformPlan " + savedplan.PlanName("obj0", "tfc-obj0-plan-1")))
	g.Expect(o.log).NotTo(ContainSubstring(`"resource_changes"`), "the saved plan's document stays out of the log")
	g.Expect(o.log).NotTo(ContainSubstring(`"planFile"`))
}

// TestGuardedApply: an apply without an approval applies a plan without deletes, and stops
// (blocked) before a replace, storing the plan for approval; the approved apply of that plan
// then applies it.
func TestGuardedApply(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, "cluster")

	first := f.run(ctx, "apply", "--inputs-hash=h2:one").ok(t)
	g.Expect(first.stepNames()).To(Equal([]string{"init", "validate", "plan", "show", "apply"}))
	g.Expect(first.res.Changes).To(Equal(&runresult.Changes{Add: 4}))
	g.Expect(first.res.Destructive).To(BeFalse())

	serial := f.state(ctx)["serial"]
	f.vars["network_cidr"] = "10.1.0.0/16"
	blocked := f.run(ctx, "apply", append(f.object(ctx, "tfc-obj0-apply-2"), "--inputs-hash=h2:two")...)
	// A held plan is the guard at work, not a failure: the Job succeeds and no Warning is posted
	// (monitoring pages on failed Jobs and Warning Events).
	g.Expect(blocked.code).To(Equal(0))
	g.Expect(blocked.res.Held()).To(BeTrue())
	g.Expect(blocked.res.Error.Kind).To(Equal(runresult.KindBlocked))
	g.Expect(blocked.log).To(ContainSubstring("apply held for approval"))
	events := f.events(ctx)
	g.Expect(events).To(ContainElement(And(HavePrefix("Normal PlanHeld apply held: its plan ("), ContainSubstring("1 to replace"))))
	g.Expect(events).NotTo(ContainElement(HavePrefix("Warning")))
	g.Expect(blocked.res.Error.Summary).To(ContainSubstring("module.role.terraform_data.network (replace)"))
	g.Expect(blocked.res.Destructive).To(BeTrue())
	g.Expect(blocked.res.Plan.Replace).To(Equal(1))
	g.Expect(blocked.stepNames()).To(Equal([]string{"init", "validate", "plan", "show"}))
	g.Expect(f.state(ctx)["serial"]).To(Equal(serial), "a blocked apply changes nothing")
	g.Expect(f.lockHolder(ctx)).To(BeEmpty())

	a := f.approve(ctx, "tfc-obj0-apply-2", "h2:two")
	allowed := f.run(ctx, "apply", append(f.object(ctx, "tfc-obj0-apply-3"), a.flags()...)...).ok(t)
	g.Expect(allowed.res.Changes.Destroy).To(BeNumerically(">", 0))

	nothing := f.run(ctx, "apply", "--inputs-hash=h2:two").ok(t)
	g.Expect(nothing.stepNames()).To(Equal([]string{"init", "validate", "plan"}), "no changes, no apply")
}

// TestApprovedApply: an approved apply applies the approved saved plan, and applies nothing
// (plan-changed, storing its new plan for approval) when the plan it makes again differs, when
// the state moved on since the approved plan was made (OpenTofu refuses the stale saved plan),
// when the saved plan is not the one the manager verified, or when it has none.
func TestApprovedApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	planned := func(t *testing.T) (*fixture, approval) {
		f := newFixture(t, "cluster")
		f.run(ctx, "apply").ok(t)
		f.vars["network_cidr"] = "10.1.0.0/16"
		f.run(ctx, "plan", f.object(ctx, "tfc-obj0-plan-1")...).ok(t)
		return f, f.approve(ctx, "tfc-obj0-plan-1", "h2:two")
	}
	refused := func(t *testing.T, f *fixture, o outcome, serial any, why string) {
		g := NewWithT(t)
		g.Expect(o.code).To(Equal(1), o.log)
		g.Expect(o.res.Error.Kind).To(Equal(runresult.KindPlanChanged), o.raw)
		g.Expect(o.res.Error.Summary).To(ContainSubstring(why))
		g.Expect(o.res.Error.Summary).To(ContainSubstring("nothing was applied"))
		g.Expect(o.res.Changes).To(BeNil())
		g.Expect(f.state(ctx)["serial"]).To(Equal(serial), "nothing was applied")
		g.Expect(f.state(ctx)["outputs"]).To(HaveKeyWithValue("exports", HaveKeyWithValue("value", HaveKeyWithValue("network_cidr", "10.0.0.0/16"))))
		g.Expect(f.hasSavedPlan(ctx, "tfc-obj0-apply-2")).To(BeTrue(), "the new plan is stored for its own approval")
		g.Expect(f.lockHolder(ctx)).To(BeEmpty())
	}

	t.Run("applies the saved plan", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		f, a := planned(t)
		o := f.run(ctx, "apply", append(f.object(ctx, "tfc-obj0-apply-2"), a.flags()...)...).ok(t)
		g.Expect(o.stepNames()).To(Equal([]string{"init", "validate", "plan", "show", "show", "apply"}), "the plan made now, then the approved plan file")
		g.Expect(o.res.Changes).NotTo(BeNil())
		g.Expect(f.state(ctx)["outputs"]).To(HaveKeyWithValue("exports", HaveKeyWithValue("value", HaveKeyWithValue("network_cidr", "10.1.0.0/16"))))
		g.Expect(f.state(ctx)["serial"]).To(BeNumerically(">", a.prior.Serial))
		g.Expect(f.hasSavedPlan(ctx, "tfc-obj0-apply-2")).To(BeFalse(), "an applied plan stores nothing")
	})
	t.Run("plan changed", func(t *testing.T) {
		t.Parallel()
		f, a := planned(t)
		serial := f.state(ctx)["serial"]
		f.vars["network_cidr"] = "10.2.0.0/16"
		o := f.run(ctx, "apply", append(f.object(ctx, "tfc-obj0-apply-2"), a.flags()...)...)
		refused(t, f, o, serial, "differs from the approved plan")
	})
	t.Run("state moved on", func(t *testing.T) {
		t.Parallel()
		f, a := planned(t)
		f.moveState(ctx)
		serial := f.state(ctx)["serial"]
		o := f.run(ctx, "apply", append(f.object(ctx, "tfc-obj0-apply-2"), a.flags()...)...)
		refused(t, f, o, serial, "OpenTofu refused its saved plan as stale")
		NewWithT(t).Expect(o.res.Error.Step).To(Equal("apply"))
		NewWithT(t).Expect(o.stepNames()).To(Equal([]string{"init", "validate", "plan", "show", "show", "apply"}), "the changes were the same: OpenTofu itself refused")
	})
	t.Run("saved plan replaced", func(t *testing.T) {
		t.Parallel()
		f, a := planned(t)
		serial := f.state(ctx)["serial"]
		// Another digest whatever the real one's first hex digit.
		if a.digest[0] == '0' {
			a.digest = "1" + a.digest[1:]
		} else {
			a.digest = "0" + a.digest[1:]
		}
		o := f.run(ctx, "apply", append(f.object(ctx, "tfc-obj0-apply-2"), a.flags()...)...)
		refused(t, f, o, serial, "not the "+a.digest+" the manager verified")
	})
	t.Run("plan file makes other changes than its document", func(t *testing.T) {
		// Issue 19: the approver and the hash see the saved plan's document, the apply applies its
		// file. A saved plan whose file is another plan's, made with the same inputs against the
		// same state (here by a module with every resource removed: its file deletes them all),
		// under the approved plan's document, is refused before anything applies. OpenTofu itself
		// would apply that file: its variables and prior state are the approved plan's.
		t.Parallel()
		f, a := planned(t)
		serial := f.state(ctx)["serial"]
		restore := f.gutModule()
		f.run(ctx, "plan", f.object(ctx, "tfc-obj0-plan-9")...).ok(t)
		restore()
		other := f.approve(ctx, "tfc-obj0-plan-9", "h2:two")
		forged := f.giveSavedPlan(&savedplan.Bundle{PlanFile: other.bundle.PlanFile, Plan: a.bundle.Plan}, a.hash)
		o := f.run(ctx, "apply", append(f.object(ctx, "tfc-obj0-apply-2"), forged.flags()...)...)
		refused(t, f, o, serial, "plan file does not make the changes its document")
	})
	t.Run("no saved plan", func(t *testing.T) {
		t.Parallel()
		f, a := planned(t)
		serial := f.state(ctx)["serial"]
		o := f.run(ctx, "apply", append(f.object(ctx, "tfc-obj0-apply-2"), "--expect-plan="+a.hash)...)
		refused(t, f, o, serial, "the manager gave no saved plan")
	})
	t.Run("approved plan was empty", func(t *testing.T) {
		t.Parallel()
		f, _ := planned(t)
		serial := f.state(ctx)["serial"]
		o := f.run(ctx, "apply", append(f.object(ctx, "tfc-obj0-apply-2"), "--expect-plan="+planhash.Empty)...)
		refused(t, f, o, serial, "the approved plan changed no resource")
	})
}
