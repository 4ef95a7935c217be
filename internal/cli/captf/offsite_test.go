package captf_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/offsite"
	"github.com/capx-io/capx/internal/captf/offsite/offsitetest"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/cli/captf/backups/list"
	"github.com/capx-io/capx/internal/cli/captf/backups/restore"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

// TestOffsiteDisasterRecovery: the manager copies each backup to a real S3-compatible server
// (gofakes3 on loopback); the object's namespace is deleted (the object set to Retain, so its
// infrastructure stays and its state goes with the namespace); the namespace and the object
// are re-created from their manifests, paused, and `backups restore --from offsite` brings the
// state back: the first Job of the new object is the restore, and the state it leaves is of
// the original lineage with the original resources.
func TestOffsiteDisasterRecovery(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := offsitetest.Start(t)
	creds := offsitetest.WriteCredentials(t, t.TempDir())
	targetURL := srv.TargetURL("mgmt-1")
	ns := fmt.Sprintf("dr-%d", time.Now().UnixNano()%1_000_000_000)
	create(t, testenv.Namespace(ns))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), testenv.Namespace(ns)) })
	env.StartKubeletIn(t, ns, moduleImages)
	mgrtest.Start(t, env, "--providers=captf", "--drift-interval=0", "--namespace="+ns,
		"--offsite-backup-url="+targetURL, "--offsite-backup-credentials="+creds)

	// The operator's copy of the bucket credential, which the tenant cannot read.
	operator := env.NewNamespace(t)
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operator, Name: "offsite"},
		Data: map[string][]byte{offsite.AccessKeyFile: []byte(offsitetest.AccessKey), offsite.SecretKeyFile: []byte(offsitetest.SecretKey)}})
	offsiteFlags := []string{"--offsite-url", targetURL, "--offsite-credentials-secret", operator + "/offsite"}

	manifests := func(paused bool) (*clusterv1.Cluster, *captfv1.TerraformCluster) {
		cluster := testenv.Cluster(ns, "c1", "TerraformCluster", "c1")
		cluster.Spec.Paused = ptr.To(paused)
		create(t, cluster)
		tc := testenv.TerraformCluster(ns, "c1", "c1", clusterImage)
		tc.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "c1", UID: cluster.UID, Controller: ptr.To(true)}}
		tc.Spec.Variables = vars(map[string]any{"failure_domains": []string{"fd-a"}})
		create(t, tc)
		return cluster, tc
	}
	_, tc := manifests(false)
	var copied captfv1.StateBackup
	mgrtest.WaitFor(t, env, tc, 3*time.Minute, "provisioned and copied offsite", func(o *captfv1.TerraformCluster) bool {
		if !ptr.Deref(o.Status.Initialization.Provisioned, false) || o.Status.ActiveJob != nil || len(o.Status.StateBackups) == 0 {
			return false
		}
		copied = o.Status.StateBackups[0]
		return copied.Offsite != ""
	})
	suffix := contract.StateSuffix(ns, captfv1.KindCluster, "c1")
	before, err := state.Read(ctx, env.Client, ns, suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(copied.Serial).To(Equal(before.Serial))
	g.Expect(copied.Offsite).To(Equal(fmt.Sprintf("s3://%s/mgmt-1/%s/TerraformCluster/c1/%d-%s.tfstate.gz", offsitetest.Bucket, ns, before.Serial, before.Digest)))

	var l list.List
	r := run(t, ns, runOpts{}, append([]string{"backups", "list", "c1", "--offsite", "-o", "json"}, offsiteFlags...)...)
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	r.decode(t, &l)
	g.Expect(l.Backups[0].Offsite).To(Equal(copied.Offsite))
	g.Expect(l.Offsite).To(ContainElement(HaveField("Location", copied.Offsite)))
	r = run(t, ns, runOpts{}, append([]string{"backups", "list", "c1", "--offsite"}, offsiteFlags...)...)
	g.Expect(r.out).To(ContainSubstring("Offsite copies in " + targetURL))

	// The namespace goes, with the state and its in-cluster backups; the infrastructure stays.
	patch := client.MergeFrom(tc.DeepCopy())
	tc.Spec.DeletionPolicy = captfv1.DeletionPolicyRetain
	g.Expect(env.Client.Patch(ctx, tc, patch)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, testenv.Namespace(ns))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
	}, 3*time.Minute, time.Second).Should(BeTrue(), "namespace %s deleted", ns)

	// Re-created from git, paused, so that nothing applies before the state is back.
	create(t, testenv.Namespace(ns))
	cluster, tc := manifests(true)
	mgrtest.WaitFor(t, env, tc, time.Minute, "paused", func(o *captfv1.TerraformCluster) bool {
		return slices.ContainsFunc(o.Status.Conditions, func(c metav1.Condition) bool {
			return c.Type == clusterv1.PausedCondition && c.Status == metav1.ConditionTrue
		})
	})
	_, err = state.Read(ctx, env.Client, ns, suffix)
	g.Expect(state.Reason(err)).To(Equal(captfv1.StateNotFoundReason))

	var res restore.Result
	r = run(t, ns, runOpts{}, append([]string{"backups", "restore", "c1", "--from", "offsite", "--serial", fmt.Sprint(before.Serial), "--yes", "-o", "json"}, offsiteFlags...)...)
	g.Expect(r.code).To(Equal(cmdutil.ExitOK), r.String())
	r.decode(t, &res)
	g.Expect(res.Requested).To(BeTrue())
	g.Expect(res.From).To(Equal(copied.Offsite))

	patch = client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Paused = ptr.To(false)
	g.Expect(env.Client.Patch(ctx, cluster, patch)).To(Succeed())
	mgrtest.WaitFor(t, env, tc, 3*time.Minute, "restored", func(o *captfv1.TerraformCluster) bool {
		return o.Status.ActiveJob == nil && o.Status.LastRestoredSerial != nil && *o.Status.LastRestoredSerial == before.Serial &&
			slices.ContainsFunc(o.Status.Conditions, func(c metav1.Condition) bool {
				return c.Type == captfv1.RestoreJobSucceededCondition && c.Status == metav1.ConditionTrue && c.Reason == captfv1.StateRestoredReason
			})
	})
	after, err := state.Read(ctx, env.Client, ns, suffix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Lineage).To(Equal(before.Lineage))
	g.Expect(after.Resources).To(Equal(before.Resources))
	g.Expect(after.Serial).To(BeNumerically(">", before.Serial))

	// The restore was the new object's first Job: nothing applied into an empty state.
	var jobs batchv1.JobList
	g.Expect(env.Client.List(ctx, &jobs, client.InNamespace(ns), objects.Wrap(tc).Owner().Selector())).To(Succeed())
	slices.SortFunc(jobs.Items, func(a, b batchv1.Job) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	g.Expect(jobs.Items).NotTo(BeEmpty())
	g.Expect(jobs.Items[0].Labels[captfv1.OperationLabel]).To(Equal(string(captfv1.OperationRestore)), "the first Job %s", jobs.Items[0].Name)
}
