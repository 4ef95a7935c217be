package controllers_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/captf/statekey"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

// managerNamespace is the namespace config/rbac gives the manager its own rights in.
const managerNamespace = "capx-system"

// startEncryptingManager runs the real manager for ns as its own ServiceAccount, with exactly the
// shipped rights (config/rbac, the state encryption Role included), with --state-encryption:
// its master key Secret in capx-system and its key endpoint on a free local port.
func startEncryptingManager(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	cfg := asManager(t)
	err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := env.Apply(ctx, filepath.Join(env.Root, "config", "rbac", "state_encryption_role.yaml")); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	env.StartKubeletIn(t, ns, moduleImages)
	mgrtest.StartWith(t, env, cfg, "--providers=captf", "--drift-interval=0", "--namespace="+ns, "--destroy-namespace-prefix=",
		"--state-encryption", "--state-encryption-namespace="+managerNamespace,
		"--state-key-address="+addr, "--state-key-url=https://"+addr+statekey.Path)
}

// TestStateEncryptionWired (issue 23 item 4): the manager, run with --state-encryption as its
// own ServiceAccount, creates its master key Secret and serves the key endpoint. A
// TerraformCluster with spec.stateEncryption Encrypt applies with the real OpenTofu: its state
// Secret holds OpenTofu's envelope with no resource attribute or output in the clear, the
// manager still reads its outputs into status, and a backup of an encrypted serial restores.
// A TerraformCluster beside it without the field runs exactly as before: plain state, no
// encryption flags on its Jobs.
func TestStateEncryptionWired(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	t.Parallel()
	ns := env.NewNamespace(t)
	startEncryptingManager(t, ns)
	const kind = captfv1.KindCluster

	enc := newTerraformCluster(t, ns, "enc", func(tc *captfv1.TerraformCluster) {
		tc.Spec.StateEncryption = &captfv1.StateEncryption{Mode: captfv1.StateEncryptionEncrypt}
	})
	plain := newTerraformCluster(t, ns, "plain", nil)
	waitFor(t, enc, 3*time.Minute, "provisioned, encrypted", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization) && o.Status.ActiveJob == nil
	})
	waitFor(t, plain, 3*time.Minute, "provisioned, plain", func(o *captfv1.TerraformCluster) bool {
		return provisioned(o.Status.Initialization) && o.Status.ActiveJob == nil
	})

	// The master key Secret the manager made in its own namespace.
	keys := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: "captf-state-encryption"}, keys)).To(Succeed())
	master, err := statekey.NewMaster(keys.Data[statekey.MasterKeyKey])
	g.Expect(err).NotTo(HaveOccurred())

	// Encrypted at rest; the outputs reached status all the same.
	doc := stateDocument(t, ns, kind, "enc")
	g.Expect(statekey.IsEnvelope(doc)).To(BeTrue(), "the backend holds OpenTofu's encrypted form")
	for _, word := range []string{"10.0.0.0/16", "fd-a", "terraform_data", "network_cidr", "control_plane_endpoint", `"resources"`, `"outputs"`} {
		g.Expect(string(doc)).NotTo(ContainSubstring(word), "the state Secret shows %s in the clear", word)
	}
	g.Expect(enc.Status.FailureDomains).NotTo(BeEmpty(), "failure_domains output in status")
	g.Expect(enc.Spec.ControlPlaneEndpoint.Host).To(Equal("enc."+ns+".capx.test"), "control_plane_endpoint output on the spec")
	g.Expect(enc.Status.StateResources).To(Equal(ptr.To[int32](3)), "the manager counted the resources inside the ciphertext")
	_, err = state.Read(ctx, env.Client, ns, contract.StateSuffix(ns, kind, "enc"))
	g.Expect(state.Reason(err)).To(Equal(captfv1.StateEncryptedReason), "without the master key the state does not read")
	for _, j := range jobsOf(t, ns, kind, "enc") {
		g.Expect(j.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--state-encryption=encrypt"), "Job %s", j.Name)
	}

	// The object without the field: as before.
	g.Expect(statekey.IsEnvelope(stateDocument(t, ns, kind, "plain"))).To(BeFalse())
	g.Expect(readState(t, ns, kind, "plain").Encrypted).To(BeFalse())
	g.Expect(plain.Status.FailureDomains).NotTo(BeEmpty())
	for _, j := range jobsOf(t, ns, kind, "plain") {
		for _, c := range j.Spec.Template.Spec.Containers {
			g.Expect(strings.Join(c.Args, " ")).NotTo(ContainSubstring("--state-"), "Job %s of the plain object", j.Name)
		}
		g.Expect(slices.ContainsFunc(j.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
			return v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool {
				return s.ServiceAccountToken != nil && s.ServiceAccountToken.Audience == statekey.Audience
			})
		})).To(BeFalse(), "Job %s of the plain object has a state key token", j.Name)
	}

	// Backups of encrypted serials, and a restore of the first.
	encSuffix := contract.StateSuffix(ns, kind, "enc")
	readEnc := func() *state.Snapshot {
		s, err := state.ReadWith(ctx, env.Client, ns, encSuffix, master)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Encrypted).To(BeTrue())
		return s
	}
	first := readEnc()
	update(t, enc, func(o *captfv1.TerraformCluster) {
		o.Spec.Variables = vars(map[string]any{"failure_domains": []string{"fd-a", "fd-b", "fd-c"}})
	})
	var second *state.Snapshot
	waitFor(t, enc, 3*time.Minute, "the change applied and both serials backed up", func(o *captfv1.TerraformCluster) bool {
		if o.Status.ActiveJob != nil || o.Status.AppliedInputsHash == first.InputsHash {
			return false
		}
		second = readEnc()
		return backedUp(o, first.Serial) && backedUp(o, second.Serial) && len(o.Status.FailureDomains) == 3
	})
	set, err := state.FindBackup(ctx, env.Client, ns, encSuffix, first.Serial)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(state.VerifyBackupWith(ctx, env.Client, ns, encSuffix, set, first.Lineage, master)).To(Succeed())
	g.Expect(state.VerifyBackup(ctx, env.Client, ns, set, first.Lineage)).NotTo(Succeed(), "the backup is encrypted too")

	annotate(t, enc, captfv1.RestoreStateAnnotation, ptr.To(strconv.FormatInt(first.Serial, 10)))
	waitFor(t, enc, 3*time.Minute, "restored", func(o *captfv1.TerraformCluster) bool {
		return hasCondition(o, captfv1.RestoreJobSucceededCondition, metav1.ConditionTrue, captfv1.StateRestoredReason) &&
			ptr.Deref(o.Status.LastRestoredSerial, -1) == first.Serial
	})
	g.Eventually(func() error {
		s := readEnc()
		if s.Serial <= second.Serial || s.Lineage != first.Lineage {
			return fmt.Errorf("serial %d lineage %s; want a serial above %d in lineage %s", s.Serial, s.Lineage, second.Serial, first.Lineage)
		}
		return nil
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	g.Expect(statekey.IsEnvelope(stateDocument(t, ns, kind, "enc"))).To(BeTrue(), "the restored state is stored encrypted")
}
