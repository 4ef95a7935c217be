package runner_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
	"github.com/capx-io/capx/internal/captf/runresult"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/captf/statekey"
	"github.com/capx-io/capx/internal/testenv"
)

// keyServer is the manager's state key endpoint on the test API server: its own master Secret
// in a namespace of its own, serving on 127.0.0.1.
type keyServer struct {
	url    string
	caFile string
	master *statekey.Master
}

func startKeyServer(t *testing.T) *keyServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ns := env.NewNamespace(t)
	mat, err := statekey.Load(ctx, env.Client, ns, "captf-state-encryption", []string{"127.0.0.1"}, time.Now())
	must(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv := &statekey.Server{Master: mat.Master, Reviews: env.Client, Reader: env.Client, Cert: mat.Cert}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		must(t, <-done)
	})
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	must(t, os.WriteFile(caFile, mat.CAPEM, 0o600))
	return &keyServer{url: "https://" + ln.Addr().String() + statekey.Path, caFile: caFile, master: mat.Master}
}

// runnerPod makes what the manager would have made for the fixture's object: the object, the
// runner ServiceAccount, a Job it controls and that Job's Pod, and writes the Pod's projected
// token of the state key audience to a file, as the kubelet would.
func (f *fixture) runnerPod(ctx context.Context) string {
	t := f.t
	obj := testenv.TerraformCluster(f.ns, "obj0", "c", "module:v1")
	must(t, env.Client.Create(ctx, obj))
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "captf-runner"}}
	must(t, env.Client.Create(ctx, sa))
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "obj0-apply", Labels: map[string]string{
			captfv1.ManagedLabel: "true", captfv1.OwnerKindLabel: captfv1.KindCluster}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "runner"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, ServiceAccountName: sa.Name,
				Containers: []corev1.Container{{Name: "source", Image: "module:v1"}}}}},
	}
	must(t, controllerutil.SetControllerReference(obj, job, env.Scheme))
	must(t, env.Client.Create(ctx, job))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "obj0-apply-x"}, Spec: job.Spec.Template.Spec}
	must(t, controllerutil.SetControllerReference(job, pod, env.Scheme))
	must(t, env.Client.Create(ctx, pod))
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		Audiences: []string{statekey.Audience}, ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}
	must(t, env.Client.SubResource("token").Create(ctx, sa, tr))
	p := filepath.Join(f.dir, "state-key-token")
	must(t, os.WriteFile(p, []byte(tr.Status.Token), 0o600))
	return p
}

// encryptionArgs are the flags the manager gives a Job of an object with encrypted state.
func (f *fixture) encryptionArgs(ks *keyServer, mode, token string) []string {
	ca, err := os.ReadFile(ks.caFile)
	must(f.t, err)
	return []string{"--state-encryption=" + mode, "--state-key-url=" + ks.url, "--state-key-ca=" + string(ca),
		"--state-key-token=" + token, "--state-key-helper=" + runnerBinary(f.t)}
}

// stateDoc is the decompressed data of the state Secret.
func stateDoc(t *testing.T, gz []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	must(t, err)
	b, err := io.ReadAll(zr)
	must(t, err)
	return b
}

// TestEncryptedState applies with state encryption on, with the real OpenTofu and the real key
// endpoint: the state Secret holds no resource attribute or output in the clear, the manager's
// reader gets serial, lineage, outputs and the resource count by decrypting in memory, a reader
// without the key is told the state is encrypted, and a Job given another manager's key fails
// before it changes anything.
func TestEncryptedState(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ks := startKeyServer(t)
	f := newFixture(t, "cluster")
	token := f.runnerPod(ctx)
	args := f.encryptionArgs(ks, "encrypt", token)

	res := f.run(ctx, "apply", args...).ok(t)
	g.Expect(res.log).To(ContainSubstring("state encryption: encrypt"))
	secret := f.stateSecret(ctx)
	doc := stateDoc(t, secret.Data[contract.BackendStateKey])
	g.Expect(statekey.IsEnvelope(doc)).To(BeTrue(), "the backend holds OpenTofu's encrypted form")
	for _, plain := range []string{"10.0.0.0/16", "fd-a", "terraform_data", "network_cidr", "control_plane_endpoint", `"resources"`, `"outputs"`} {
		g.Expect(string(doc)).NotTo(ContainSubstring(plain), "the state Secret shows %s in the clear", plain)
	}

	snap, err := state.DecodeWith([]corev1.Secret{*secret}, f.suffix, ks.master)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(snap.Encrypted).To(BeTrue())
	g.Expect(snap.Serial).To(BeNumerically(">", 0))
	g.Expect(snap.Lineage).NotTo(BeEmpty())
	g.Expect(snap.Resources).To(Equal(3), "network, control_plane, failure_domain")
	g.Expect(snap.Outputs).To(HaveKey("exports"))
	g.Expect(string(snap.Outputs["exports"].Value)).To(ContainSubstring("10.0.0.0/16"))

	_, err = state.Decode([]corev1.Secret{*secret}, f.suffix)
	g.Expect(errors.Is(err, state.ErrEncrypted)).To(BeTrue(), "%v", err)
	other, _ := statekey.NewMaster(bytes.Repeat([]byte{9}, statekey.KeyBytes))
	_, err = state.DecodeWith([]corev1.Secret{*secret}, f.suffix, other)
	g.Expect(errors.Is(err, state.ErrEncrypted)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("another master key"))
	g.Expect(err.Error()).To(ContainSubstring(ks.master.ID()))

	// A second apply reads the encrypted state and changes nothing.
	f.run(ctx, "apply", args...).ok(t)
	again, err := state.DecodeWith([]corev1.Secret{*f.stateSecret(ctx)}, f.suffix, ks.master)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Lineage).To(Equal(snap.Lineage))

	// Another management cluster's key: the Job fails in its key provider, saying why, and the
	// state is untouched.
	elsewhere := startKeyServer(t)
	before := f.stateSecret(ctx)
	bad := f.run(ctx, "apply", f.encryptionArgs(elsewhere, "encrypt", token)...)
	g.Expect(bad.code).To(Equal(1))
	g.Expect(bad.res.Error).NotTo(BeNil())
	g.Expect(bad.log).To(ContainSubstring("another master key"))
	after := f.stateSecret(ctx)
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "the state Secret was written")
	g.Expect(after.Data).To(Equal(before.Data))
}

// TestStateEncryptionTurnedOnAndOff: a plain state is encrypted at its next write once
// encryption is on (OpenTofu writes a state only when it changes), and written plain again at
// the next write once it is off (decrypt), keeping its lineage.
func TestStateEncryptionTurnedOnAndOff(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ks := startKeyServer(t)
	f := newFixture(t, "cluster")
	token := f.runnerPod(ctx)
	f.run(ctx, "apply").ok(t)
	lineage := f.state(ctx)["lineage"]

	// OpenTofu writes a state only when it changes: an apply without changes leaves it plain.
	f.run(ctx, "apply", f.encryptionArgs(ks, "encrypt", token)...).ok(t)
	g.Expect(statekey.IsEnvelope(stateDoc(t, f.stateSecret(ctx).Data[contract.BackendStateKey]))).To(BeFalse())
	f.vars["failure_domains"] = []string{"fd-a", "fd-b", "fd-c"}
	f.run(ctx, "apply", f.encryptionArgs(ks, "encrypt", token)...).ok(t)
	g.Expect(statekey.IsEnvelope(stateDoc(t, f.stateSecret(ctx).Data[contract.BackendStateKey]))).To(BeTrue())

	f.vars["failure_domains"] = []string{"fd-a", "fd-b", "fd-c", "fd-d"}
	f.run(ctx, "apply", f.encryptionArgs(ks, "decrypt", token)...).ok(t)
	g.Expect(f.state(ctx)["lineage"]).To(Equal(lineage))
	g.Expect(f.state(ctx)["resources"]).To(HaveLen(3))
}

// TestStateKeyRefused: a token that is not bound to a Pod of a CAPTF Job gets no key, and the
// run fails before its first step with the manager's reason.
func TestStateKeyRefused(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ks := startKeyServer(t)
	f := newFixture(t, "cluster")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "captf-runner"}}
	must(t, env.Client.Create(ctx, sa))
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{statekey.Audience}}}
	must(t, env.Client.SubResource("token").Create(ctx, sa, tr))
	token := filepath.Join(f.dir, "unbound-token")
	must(t, os.WriteFile(token, []byte(tr.Status.Token), 0o600))

	res := f.run(ctx, "apply", f.encryptionArgs(ks, "encrypt", token)...)
	g.Expect(res.code).To(Equal(1))
	g.Expect(res.res.Error.Kind).To(Equal(runresult.KindStep))
	g.Expect(res.res.Error.Summary).To(ContainSubstring("not a ServiceAccount token bound to a Pod"))
	g.Expect(res.stepNames()).To(BeEmpty(), "no step ran")
	var list corev1.SecretList
	must(t, env.Client.List(ctx, &list, state.Selector(f.suffix)))
	g.Expect(list.Items).To(BeEmpty(), "nothing was written")
}

// TestEncryptedBackupRestores backs an encrypted state up as the manager does (the ciphertext
// as it is), checks the backup with the manager's key, and restores it with a restore Job's
// flags: the runner decrypts it in memory, pushes it with a serial past the current one, and the
// backend holds it encrypted again with the backup's lineage and resources.
func TestEncryptedBackupRestores(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	ks := startKeyServer(t)
	f := newFixture(t, "cluster")
	token := f.runnerPod(ctx)
	args := f.encryptionArgs(ks, "encrypt", token)
	f.run(ctx, "apply", args...).ok(t)

	snap, err := state.ReadWith(ctx, env.Client, f.ns, f.suffix, ks.master)
	g.Expect(err).NotTo(HaveOccurred())
	obj := &captfv1.TerraformCluster{}
	must(t, env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "obj0"}, obj))
	owner := metav1.OwnerReference{APIVersion: captfv1.GroupVersion.String(), Kind: captfv1.KindCluster, Name: obj.Name, UID: obj.UID}
	_, err = state.Backup(ctx, env.Client, snap, owner, state.BackupOptions{Keep: 5})
	g.Expect(err).NotTo(HaveOccurred())
	set, err := state.FindBackup(ctx, env.Client, f.ns, f.suffix, snap.Serial)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(state.VerifyBackupWith(ctx, env.Client, f.ns, f.suffix, set, snap.Lineage, ks.master)).To(Succeed())
	other, _ := statekey.NewMaster(bytes.Repeat([]byte{9}, statekey.KeyBytes))
	err = state.VerifyBackupWith(ctx, env.Client, f.ns, f.suffix, set, snap.Lineage, other)
	g.Expect(errors.Is(err, state.ErrBackupInvalid)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("another master key"))

	f.run(ctx, "destroy", args...).ok(t)
	destroyed, err := state.ReadWith(ctx, env.Client, f.ns, f.suffix, ks.master)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(destroyed.Encrypted).To(BeTrue())
	g.Expect(destroyed.Resources).To(Equal(0))

	var chunks [][]byte
	for _, name := range set.Chunks {
		s := &corev1.Secret{}
		must(t, env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, s))
		chunks = append(chunks, s.Data[contract.BackendStateKey])
	}
	f.writeRestoreChunks(chunks...)
	sum := sha256.Sum256(bytes.Join(chunks, nil))
	restoreArgs := append([]string{fmt.Sprintf("--restore-chunks=%d", len(chunks)), "--restore-resources=3",
		"--restore-digest=" + hex.EncodeToString(sum[:])}, args...)

	// Without the key the restore is refused before anything is pushed.
	plainJob := f.run(ctx, "restore", restoreArgs[:3]...)
	g.Expect(plainJob.code).To(Equal(1))
	g.Expect(plainJob.res.Error.Summary).To(ContainSubstring("restored state is encrypted"))

	res := f.run(ctx, "restore", restoreArgs...).ok(t)
	g.Expect(res.stepNames()).To(Equal([]string{"init", "state-pull", "state-push", "state-list"}))
	g.Expect(res.log).NotTo(ContainSubstring("10.0.0.0/16"))
	restored, err := state.ReadWith(ctx, env.Client, f.ns, f.suffix, ks.master)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(restored.Encrypted).To(BeTrue(), "the restored state is stored encrypted")
	g.Expect(restored.Lineage).To(Equal(snap.Lineage))
	g.Expect(restored.Serial).To(BeNumerically(">", destroyed.Serial))
	g.Expect(restored.Resources).To(Equal(3))
	g.Expect(string(stateDoc(t, f.stateSecret(ctx).Data[contract.BackendStateKey]))).NotTo(ContainSubstring("10.0.0.0/16"))
	entries, err := os.ReadDir(filepath.Join(f.dir, "work"))
	must(t, err)
	for _, e := range entries {
		if !e.IsDir() {
			b, _ := os.ReadFile(filepath.Join(f.dir, "work", e.Name()))
			g.Expect(string(b)).NotTo(ContainSubstring("10.0.0.0/16"), "the plain state reached %s", e.Name())
		}
	}
}
