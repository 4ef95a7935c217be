package controllers_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/inputs"
	"github.com/capx-io/capx/internal/captf/jobs"
)

// TestNamespaceDeletionHoldsInfrastructure is the seed's leak closed when the manager has no
// destroy namespace (--destroy-namespace-prefix=""): a TerraformCluster moved by clusterctl (no
// status, not reconciled yet in its new home) whose namespace is deleted.
// kube-controller-manager's namespace controller deletes everything in the namespace; the
// state, backups and durable inputs stay (the captf-state-protection admission policy), so
// the object does not look never applied: it holds its deletion (NamespaceTerminating), says
// why and what to do (its Deleting condition; no Event: the namespace takes none, and one on the
// Namespace would land in "default", for other tenants to read), starts no destroy
// (Kubernetes refuses every create in the namespace), and the namespace waits. Set to
// deletionPolicy Retain, the object and then the namespace go; restored into the re-created
// namespace with the object, the destroy runs. TestNamespaceDeletionDestroysElsewhere is the
// default: the destroy runs by itself.
func TestNamespaceDeletionHoldsInfrastructure(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, kubelet := scenario(t)

	tc := newTerraformCluster(t, ns, "c", nil)
	waitFor(t, tc, 2*time.Minute, "provisioned and backed up", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization) && len(o.Status.StateBackups) > 0
	})
	owner, err := jobs.OwnerOf(tc, "c")
	g.Expect(err).NotTo(HaveOccurred())
	applied := readState(t, ns, captfv1.KindCluster, "c")
	g.Expect(applied.Resources).To(BeNumerically(">", 0))

	// The namespace controller deletes what it may (the Cluster) and is refused the state.
	namespace := deleteNamespaceOfMoved(t, tc)
	g.Eventually(func() string {
		_ = env.Client.Get(ctx, client.ObjectKey{Name: ns}, namespace)
		for _, c := range namespace.Status.Conditions {
			if c.Type == corev1.NamespaceDeletionContentFailure && c.Status == corev1.ConditionTrue {
				return c.Message
			}
		}
		return ""
	}, time.Minute, 200*time.Millisecond).Should(ContainSubstring("CAPTF keeps Secret"))
	// Kubernetes creates nothing in a terminating namespace: not a destroy Job, its run Secret or
	// lease, not an Event. Updates still pass (the hold and Retain are writes to the object).
	for _, probe := range []client.Object{
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, InvolvedObject: corev1.ObjectReference{Namespace: ns, Name: "c"}},
	} {
		err = env.Client.Create(ctx, probe, client.DryRunAll)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a %T in a terminating namespace: %v", probe, err)
		g.Expect(err.Error()).To(ContainSubstring("is being terminated"))
	}

	// The move finishes: the object is unpaused, already deleting, with no status.
	annotate(t, tc, clusterv1.PausedAnnotation, nil)
	waitFor(t, tc, time.Minute, "holding its deletion", func(o *captfv1.TerraformCluster) bool {
		d := conditions.Get(o, clusterv1.DeletingCondition)
		return d != nil && strings.HasPrefix(d.Message, "Held: namespace "+ns+" is being deleted")
	})
	g.Expect(describe(tc)).To(ContainSubstring("deletionPolicy Retain"), "the condition says what to do")
	g.Expect(namespaceEvents(t, ns)).To(BeEmpty(), "no Event in the default namespace, where other tenants read, names this object")
	never(t, 3*time.Second, "the finalizer went with the infrastructure", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(tc), &captfv1.TerraformCluster{}))
	})
	g.Expect(readState(t, ns, captfv1.KindCluster, "c").Digest).To(Equal(applied.Digest), "the state is kept, nothing destroyed")
	in := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: inputs.SecretName(owner)}, in)).To(Succeed())
	g.Expect(in.Annotations).To(HaveKeyWithValue(captfv1.AppliedAnnotation, "true"), "the applied marker is kept")
	g.Expect(kubelet.Log.String()).NotTo(ContainSubstring("captf-c-c-destroy"), "no destroy Job ran")

	// What the condition says: save CAPTF's Secrets, set Retain; the object and then the
	// namespace go.
	var saved []corev1.Secret
	list := &corev1.SecretList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{captfv1.ManagedLabel: "true"})).To(Succeed())
	for _, s := range list.Items {
		if !strings.HasPrefix(s.Name, "captf-run-") {
			saved = append(saved, s)
		}
	}
	g.Expect(saved).To(ContainElement(HaveField("Name", contract.StateSecretName(owner.StateSuffix()))))
	update(t, tc, func(o *captfv1.TerraformCluster) { o.Spec.DeletionPolicy = captfv1.DeletionPolicyRetain })
	gone(t, tc, time.Minute)
	gone(t, namespace, 3*time.Minute)

	// And the way back to a destroy: the namespace again, the saved Secrets restored, the object
	// re-created. It takes its state over (owner repair) without applying, and deleting it now
	// destroys what the state records.
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	for _, s := range saved {
		create(t, asRestored(s))
	}
	pods := kubelet.Started()
	again := newTerraformCluster(t, ns, "c", nil)
	waitFor(t, again, time.Minute, "provisioned from the restored state", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization)
	})
	g.Expect(kubelet.Started()).To(Equal(pods), "nothing applied")
	g.Expect(env.Client.Delete(ctx, again)).To(Succeed())
	gone(t, again, 2*time.Minute)
	g.Expect(kubelet.Log.String()).To(ContainSubstring("captf-c-c-destroy"), "the destroy ran")
	left := &corev1.SecretList{}
	g.Expect(env.Client.List(ctx, left, client.InNamespace(ns), client.MatchingLabels{captfv1.ManagedLabel: "true"})).To(Succeed())
	for _, s := range left.Items {
		g.Expect(s.Name).To(HavePrefix("captf-run-"), "only run Secrets, which go with their Jobs, may be left")
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestNamespaceDeletionDestroysElsewhere: the namespace of an applied, moved TerraformCluster (no
// status) with a TerraformMachine is deleted. Nothing can be created in it any more, so the manager hands the destroy to
// a copy of the object in its destroy namespace, which it creates: copies of the state, durable
// inputs and what its Jobs read (credentials, image pull Secret, env sources: kept from the
// namespace controller by the captf-state-protection policy) go with it. The copy's destroy Job destroys every resource the state records, the
// copy goes, the object lets its finalizer go, and the namespace and everything in it go;
// nothing of the copy is left in the destroy namespace.
func TestNamespaceDeletionDestroysElsewhere(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, kubelet := scenario(t, "--destroy-namespace-prefix="+destroyPrefix)
	dest := destroyNamespaceOf(t, ns)
	elsewhere := env.StartKubeletIn(t, dest, moduleImages)

	// What the Jobs read: credentials, an image pull Secret, a Secret and a ConfigMap env reads.
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloud"}, Data: map[string][]byte{"TOKEN": []byte("s3cret")}}
	pull := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "registry"}, Data: map[string][]byte{"k": []byte("v")}}
	vault := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vault"}, Data: map[string][]byte{"k": []byte("v")}}
	region := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "region"}, Data: map[string]string{"k": "eu"}}
	create(t, creds, pull, vault, region)
	tc := newTerraformCluster(t, ns, "c", func(o *captfv1.TerraformCluster) {
		o.Spec.CredentialsRef = &corev1.LocalObjectReference{Name: "cloud"}
		o.Spec.Jobs = &captfv1.JobPolicy{
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
			Env: []corev1.EnvVar{
				{Name: "VAULT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "vault"}, Key: "k"}}},
				{Name: "REGION", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "region"}, Key: "k"}}},
			},
		}
	})
	waitFor(t, tc, 2*time.Minute, "provisioned", func(o *captfv1.TerraformCluster) bool { return provisioned(o.Status.Initialization) })
	// A machine of the cluster, with the cluster's credentials: it is destroyed first.
	tm := newTerraformMachine(t, ns, "c", "m1", nil)
	waitFor(t, tm, 2*time.Minute, "the machine provisioned", func(o *captfv1.TerraformMachine) bool { return provisioned(o.Status.Initialization) })
	applied := readState(t, ns, captfv1.KindCluster, "c")
	g.Expect(applied.Resources).To(BeNumerically(">", 0))
	for _, o := range []client.Object{creds, pull, vault, region} {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		g.Expect(o.GetLabels()).To(HaveKeyWithValue(captfv1.KeptForDestroyLabel, "true"), "what a Job ran with is kept: %s", o.GetName())
	}

	// The tenant writes what the manager once took as the record of a finished hand-over: it
	// must not let the object skip its destroy (the copy itself is the only record trusted).
	annotate(t, tc, "captf.io/destroyed-elsewhere", ptrTo(dest+"/c-00000000 00000000-0000-0000-0000-000000000000"))

	// The move finishes (unpaused) once the namespace is being deleted.
	namespace := deleteNamespaceOfMoved(t, tc)
	annotate(t, tc, clusterv1.PausedAnnotation, nil)

	// The cluster's copy destroys: its Job runs in the destroy namespace, with the copied
	// credentials.
	var job batchv1.Job
	g.Eventually(func() bool {
		list := &batchv1.JobList{}
		_ = env.Client.List(ctx, list, client.InNamespace(dest))
		for _, j := range list.Items {
			if j.Labels[captfv1.OperationLabel] == string(captfv1.OperationDestroy) && j.Labels[captfv1.OwnerKindLabel] == captfv1.KindCluster {
				job = j
				return true
			}
		}
		return false
	}, 2*time.Minute, 200*time.Millisecond).Should(BeTrue(), func() string {
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc)
		copies := &captfv1.TerraformClusterList{}
		_ = env.Client.List(ctx, copies, client.InNamespace(dest))
		msg := "a destroy Job in " + dest + "; the object: " + describe(tc)
		for i := range copies.Items {
			msg += "\ncopy " + copies.Items[i].Name + ": " + describe(&copies.Items[i])
		}
		return msg
	})
	// It reads the copies, by their names in the destroy namespace.
	pod := job.Spec.Template.Spec
	copied := HavePrefix("captf-copy-c-c-")
	var secretVolumes []string
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			secretVolumes = append(secretVolumes, v.Secret.SecretName)
		}
	}
	g.Expect(secretVolumes).To(ContainElement(And(copied, HaveSuffix("-cloud"))))
	g.Expect(pod.ImagePullSecrets).To(ConsistOf(HaveField("Name", And(copied, HaveSuffix("-registry")))))
	var envFrom []string
	for _, c := range pod.Containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				envFrom = append(envFrom, e.Name+"="+e.ValueFrom.SecretKeyRef.Name)
			}
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				envFrom = append(envFrom, e.Name+"="+e.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
	}
	g.Expect(envFrom).To(ContainElements(MatchRegexp(`^VAULT=captf-copy-c-c-.*-vault$`), MatchRegexp(`^REGION=captf-copy-c-c-.*-region$`)))

	var destroyEvents []string
	g.Eventually(func() []string {
		destroyEvents = eventsIn(t, dest)
		return destroyEvents
	}, time.Minute, 200*time.Millisecond).Should(ContainElement(HavePrefix("DestroyingElsewhere:")))
	gone(t, tm, 3*time.Minute)
	gone(t, tc, 3*time.Minute)
	gone(t, namespace, 3*time.Minute)
	log := elsewhere.Log.String()
	g.Expect(log).To(MatchRegexp(`Destroy complete! Resources: [1-9][0-9]* destroyed`), "what the state recorded was destroyed")
	machineDestroy := regexp.MustCompile(`captf-m-m1-[0-9a-f]{8}-destroy-a1-\S+: captf-runner: destroy succeeded`).FindStringIndex(log)
	clusterDestroy := regexp.MustCompile(`captf-c-c-[0-9a-f]{8}-destroy-a1-\S+: captf-runner: starting destroy`).FindStringIndex(log)
	g.Expect(machineDestroy).NotTo(BeNil(), "the machine's copy destroyed")
	g.Expect(clusterDestroy).NotTo(BeNil(), "the cluster's copy destroyed")
	g.Expect(machineDestroy[0]).To(BeNumerically("<", clusterDestroy[0]), "the machine before its cluster")
	g.Expect(kubelet.Log.String()).NotTo(ContainSubstring("-destroy-"), "nothing ran in the terminating namespace")

	// The hand-over is on the Events of the destroy namespace, none in "default"; the destroy
	// namespace goes once nothing is left in it.
	g.Expect(destroyEvents).To(ContainElement(HavePrefix("DestroyingElsewhere: Destroying for TerraformCluster " + ns + "/c")))
	g.Expect(namespaceEvents(t, ns)).To(BeEmpty())
	gone(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dest}}, 2*time.Minute)
}

// deleteNamespaceOfMoved makes tc look as after clusterctl move (paused until the move
// finishes, no status), deletes its namespace, and waits for the namespace controller to have
// deleted its Cluster. It returns the Namespace.
func deleteNamespaceOfMoved(t *testing.T, tc *captfv1.TerraformCluster) *corev1.Namespace {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	annotate(t, tc, clusterv1.PausedAnnotation, ptrTo(""))
	waitFor(t, tc, time.Minute, "paused", func(o *captfv1.TerraformCluster) bool { return conditions.IsTrue(o, clusterv1.PausedCondition) })
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc)).To(Succeed())
	tc.Status = captfv1.TerraformClusterStatus{}
	g.Expect(env.Client.Status().Update(ctx, tc)).To(Succeed())
	namespace := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: tc.Namespace}, namespace)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, namespace)).To(Succeed())
	gone(t, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: tc.Name}}, time.Minute)
	return namespace
}

// namespaceEvents are the reasons and messages of the Events about a Namespace (they live in
// the default namespace).
func namespaceEvents(t *testing.T, ns string) []string {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Namespace" && e.InvolvedObject.Name == ns {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// eventsIn are the reasons and messages of the Events in a namespace.
func eventsIn(t *testing.T, ns string) []string {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}
