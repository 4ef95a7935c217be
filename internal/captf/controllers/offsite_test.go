package controllers_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/offsite"
	"github.com/capx-io/capx/internal/captf/offsite/offsitetest"
)

// TestOffsiteCopyRetried: with a credential the object store refuses, the object still
// provisions and is backed up in the cluster (a failed copy holds nothing), the failure is a
// Warning Event that names the cause and not the secret; once the mounted credential is
// rotated, the retry copies the backup to the real S3-compatible server (gofakes3), with the
// state's bytes, serial, lineage and digest, and status.stateBackups lists the copy.
func TestOffsiteCopyRetried(t *testing.T) {
	g := NewWithT(t)
	srv := offsitetest.Start(t)
	creds := t.TempDir()
	for name, v := range map[string]string{offsite.AccessKeyFile: "revoked-key", offsite.SecretKeyFile: "revoked-secret-value"} {
		g.Expect(os.WriteFile(filepath.Join(creds, name), []byte(v), 0o600)).To(Succeed())
	}
	ns, _ := scenario(t, "--offsite-backup-url="+srv.TargetURL("mgmt-1"), "--offsite-backup-credentials="+creds)

	tc := newTerraformCluster(t, ns, "c1", nil)
	waitFor(t, tc, 3*time.Minute, "provisioned and backed up, without an offsite copy", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization) && o.Status.ActiveJob == nil && len(o.Status.StateBackups) > 0 && o.Status.StateBackups[0].Offsite == ""
	})
	var failed string
	g.Eventually(func() bool {
		events, _ := objectEvents(t, ns, "c1")
		i := slices.IndexFunc(events, func(e string) bool { return strings.HasPrefix(e, "Warning OffsiteBackupFailed: ") })
		if i >= 0 {
			failed = events[i]
		}
		return i >= 0
	}, time.Minute, 200*time.Millisecond).Should(BeTrue())
	g.Expect(failed).To(ContainSubstring("check the access key, the secret key and the bucket's policy: the object store refused the credential"))
	g.Expect(failed).To(ContainSubstring("the in-cluster backups are kept, retrying in 30s"))
	g.Expect(failed).NotTo(ContainSubstring("revoked-secret-value"))
	waitFor(t, tc, time.Minute, "OffsiteBackupsCurrent False while the copy fails", func(o *captfv1.TerraformCluster) bool {
		c := conditions.Get(o, captfv1.OffsiteBackupsCurrentCondition)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == captfv1.OffsiteBackupFailedReason
	})
	g.Expect(conditions.Get(tc, captfv1.OffsiteBackupsCurrentCondition).Message).To(And(
		ContainSubstring("the object store refused the credential"), ContainSubstring("have no copy in"),
		Not(ContainSubstring("revoked-secret-value"))))
	g.Expect(conditions.IsTrue(tc, captfv1.ReadyCondition)).To(BeTrue(), "a failed copy holds nothing")

	offsitetest.WriteCredentials(t, creds) // the rotated Secret, as the kubelet refreshes it
	var copied captfv1.StateBackup
	waitFor(t, tc, 3*time.Minute, "copied offsite on the retry", func(o *captfv1.TerraformCluster) bool {
		if len(o.Status.StateBackups) == 0 {
			return false
		}
		copied = o.Status.StateBackups[0]
		return copied.Offsite != "" && conditions.IsTrue(o, captfv1.OffsiteBackupsCurrentCondition)
	})
	g.Expect(conditions.Get(tc, captfv1.OffsiteBackupsCurrentCondition).Reason).To(Equal(captfv1.OffsiteBackupsCopiedReason))
	snap := readState(t, ns, captfv1.KindCluster, "c1")
	copies, _, err := srv.Store(t, "mgmt-1").List(context.Background(), offsite.Object{Namespace: ns, Kind: captfv1.KindCluster, Name: "c1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(copies).NotTo(BeEmpty())
	c := copies[0]
	g.Expect(c.Location).To(Equal(copied.Offsite))
	g.Expect(c.Serial).To(Equal(snap.Serial))
	g.Expect(c.Lineage).To(Equal(snap.Lineage))
	g.Expect(c.Digest).To(Equal(snap.Digest))
	g.Expect(c.Bytes).To(Equal(snap.Bytes))
	g.Expect(c.Resources).To(Equal(snap.Resources))
	events, _ := objectEvents(t, ns, "c1")
	g.Expect(events).To(ContainElement(HavePrefix("Normal OffsiteBackupStored: Copied state backup " + copied.SecretName)))
}
