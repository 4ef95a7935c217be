package addons_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/addons"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/vco"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{}, &env))
}

// The workload cluster in these tests is the envtest API server itself, reached through a
// kubeconfig Secret as Cluster API writes it: the management and workload sides are two
// namespaces (and kube-system) of one real API server.

func kubeconfigSecret(t *testing.T, ns, cluster string) *corev1.Secret {
	t.Helper()
	b, err := os.ReadFile(env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster + "-kubeconfig"}, Data: map[string][]byte{"value": b}}
}

func create(t *testing.T, o client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), o); err != nil {
		t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

func vcoCluster(ns, name string) *capvcov1.VCOCluster {
	vc := &capvcov1.VCOCluster{}
	vc.Namespace, vc.Name = ns, name
	vc.Spec.Location = "nl-rmd-dc01-001"
	vc.Spec.CredentialsRef.Name = "vco-credentials"
	vc.Status.Cloudspaces = []capvcov1.CloudspaceStatus{{Site: "primary", ID: "cs-1"}}
	return vc
}

// configMapAddon renders one ConfigMap per name into its namespace, and its data from Data.
type configMapAddon struct {
	ns    string
	names []string
	data  string
	skip  string
}

func (configMapAddon) Name() string { return "test-config" }

func (a *configMapAddon) Render(s addons.Settings) (addons.Rendered, error) {
	if a.skip != "" {
		return addons.Rendered{Skip: a.skip}, nil
	}
	var objs []*unstructured.Unstructured
	for _, n := range a.names {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"namespace": a.ns, "name": n}, "data": map[string]any{"image": s.Image("capvco-test"), "v": a.data}}}
		objs = append(objs, u)
	}
	return addons.Rendered{Objects: objs}, nil
}

// TestDeliveryLifecycle: nothing is applied before the kubeconfig Secret exists; then the
// add-on's objects are applied with the manager's version; an unchanged, available add-on is not
// applied again until its resync; a new manager version is applied in place; what the add-on no
// longer renders is deleted; a cluster that stops wanting it keeps what was applied.
func TestDeliveryLifecycle(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	a := &configMapAddon{ns: ns, names: []string{"one", "two"}, data: "a"}
	d := &addons.Delivery{Management: env.Client, Registry: addons.Registry{a},
		Manager: addons.Settings{Version: "v1.0.0", ImageRepository: "registry.example/capx"}}
	vc := vcoCluster(ns, "prod")
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)

	obs := d.Reconcile(ctx, addons.Target{VCOCluster: vc, ClusterName: "prod"}, now)
	if !strings.Contains(obs.Waiting, "prod-kubeconfig does not exist yet") || obs.Addons[0].Checked {
		t.Fatalf("before the kubeconfig: %+v", obs)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "one"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("applied before the kubeconfig Secret existed: %v", err)
	}

	create(t, kubeconfigSecret(t, ns, "prod"))
	obs = d.Reconcile(ctx, addons.Target{VCOCluster: vc, ClusterName: "prod"}, now)
	o := obs.Addons[0]
	if o.Err != nil || !o.Checked || !o.Applied || !o.Available || o.Version != "v1.0.0" {
		t.Fatalf("first delivery: %+v", o)
	}
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "two"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["image"] != "registry.example/capx/capvco-test:v1.0.0" || cm.Labels[addons.NameLabel] != "test-config" ||
		cm.Annotations[addons.VersionAnnotation] != "v1.0.0" {
		t.Fatalf("applied ConfigMap: data %v labels %v annotations %v", cm.Data, cm.Labels, cm.Annotations)
	}
	vc.Status.Addons = addons.Records(&obs, vc.Status.Addons, now)
	if len(vc.Status.Addons) != 1 || !vc.Status.Addons[0].Available || vc.Status.Addons[0].Hash == "" {
		t.Fatalf("records: %+v", vc.Status.Addons)
	}

	// Unchanged and available: not applied again before the resync, applied again after it.
	obs = d.Reconcile(ctx, addons.Target{VCOCluster: vc, ClusterName: "prod"}, now.Add(time.Minute))
	if obs.Addons[0].Checked || !obs.Addons[0].Available || obs.Requeue > 4*time.Minute || obs.Requeue <= 0 {
		t.Fatalf("within the resync: %+v requeue %v", obs.Addons[0], obs.Requeue)
	}
	if obs = d.Reconcile(ctx, addons.Target{VCOCluster: vc, ClusterName: "prod"}, now.Add(6*time.Minute)); !obs.Addons[0].Checked {
		t.Fatalf("after the resync: %+v", obs.Addons[0])
	}

	// A new manager version is applied in place; a ConfigMap no longer rendered is deleted.
	d.Manager.Version, a.names = "v1.1.0", []string{"one"}
	obs = d.Reconcile(ctx, addons.Target{VCOCluster: vc, ClusterName: "prod"}, now.Add(2*time.Minute))
	if o := obs.Addons[0]; !o.Applied || o.Err != nil || o.Version != "v1.1.0" {
		t.Fatalf("upgrade: %+v", o)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "one"}, cm); err != nil || cm.Data["image"] != "registry.example/capx/capvco-test:v1.1.0" {
		t.Fatalf("upgraded ConfigMap: %v %v", err, cm.Data)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "two"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the ConfigMap the add-on no longer renders: %v", err)
	}
	vc.Status.Addons = addons.Records(&obs, vc.Status.Addons, now.Add(2*time.Minute))
	if vc.Status.Addons[0].Version != "v1.1.0" {
		t.Fatalf("records after the upgrade: %+v", vc.Status.Addons)
	}

	// Skipped: nothing is deleted, and the record goes.
	a.skip = "spec.addons.test is not set"
	obs = d.Reconcile(ctx, addons.Target{VCOCluster: vc, ClusterName: "prod"}, now.Add(3*time.Minute))
	if obs.Addons[0].Skip == "" || len(addons.Records(&obs, vc.Status.Addons, now)) != 0 {
		t.Fatalf("skipped: %+v", obs.Addons[0])
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "one"}, cm); err != nil {
		t.Fatalf("a skipped add-on's objects stay: %v", err)
	}
}

// TestCloudControllerManagerDelivered: the real add-on. Its Deployment is applied with the
// manager's image, the endpoint policy lands in the cloud-config, the credential copy has only the
// credential keys, and availability follows the Deployment's status.
func TestCloudControllerManagerDelivered(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vco-credentials"}, Data: map[string][]byte{
		vco.SecretKeyURL: []byte("http://vcosim.capvco-system.svc:8080/api/1"), vco.SecretKeyCustomer: []byte("acme"),
		vco.SecretKeyJWT: []byte("token"), "note": []byte("not for the workload cluster")}})
	create(t, kubeconfigSecret(t, ns, "prod"))
	d := &addons.Delivery{Management: env.Client, Registry: addons.Registry{addons.CloudControllerManager{}},
		Manager: addons.Settings{Version: "v1.2.3", ImageRepository: "registry.example/capx",
			Platform: addons.Platform{AllowHTTP: true, AllowedHosts: []string{"vcosim.capvco-system.svc:8080"}}}}
	vc := vcoCluster(ns, "prod")
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)

	obs := d.Reconcile(ctx, addons.Target{VCOCluster: vc, ClusterName: "prod"}, now)
	o := obs.Addons[0]
	if o.Err != nil || !o.Applied || o.Available || len(o.Unavailable) != 1 || !strings.Contains(o.Unavailable[0], "Deployment kube-system/") {
		t.Fatalf("first delivery: %+v", o)
	}
	if obs.Requeue != 15*time.Second {
		t.Errorf("an unavailable add-on is looked at again after %v", obs.Requeue)
	}
	dep := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "capvco-cloud-controller-manager"}, dep); err != nil {
		t.Fatal(err)
	}
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != "registry.example/capx/capvco-cloud-controller-manager:v1.2.3" {
		t.Errorf("image %s", img)
	}
	sec := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: addons.CCMCredentialsSecret}, sec); err != nil {
		t.Fatal(err)
	}
	if _, leaked := sec.Data["note"]; leaked || string(sec.Data[vco.SecretKeyCustomer]) != "acme" {
		t.Errorf("credential copy keys: %v", keys(sec.Data))
	}
	var cms corev1.ConfigMapList
	if err := env.Client.List(ctx, &cms, client.InNamespace("kube-system"), client.MatchingLabels{addons.NameLabel: "cloud-controller-manager"}); err != nil {
		t.Fatal(err)
	}
	var cloudConfig string
	for _, cm := range cms.Items {
		for _, v := range cm.Data {
			cloudConfig += v
		}
	}
	if !strings.Contains(cloudConfig, "allowHTTP: true") || !strings.Contains(cloudConfig, "vcosim.capvco-system.svc:8080") {
		t.Errorf("the cloud-config lacks the manager's endpoint policy:\n%s", cloudConfig)
	}

	// The Deployment becomes available (as its controller would report it): so does the add-on.
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: *dep.Spec.Replicas,
		UpdatedReplicas: *dep.Spec.Replicas, AvailableReplicas: *dep.Spec.Replicas, ReadyReplicas: *dep.Spec.Replicas}
	if err := env.Client.Status().Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	vc.Status.Addons = addons.Records(&obs, nil, now)
	obs = d.Reconcile(ctx, addons.Target{VCOCluster: vc, ClusterName: "prod"}, now.Add(20*time.Second))
	if o := obs.Addons[0]; !o.Checked || !o.Available || o.Err != nil {
		t.Fatalf("after the rollout: %+v", o)
	}

	// A rotated credential is copied again (the hash covers the source's resourceVersion).
	src := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vco-credentials"}, src); err != nil {
		t.Fatal(err)
	}
	src.Data[vco.SecretKeyJWT] = []byte("rotated")
	if err := env.Client.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	vc.Status.Addons = addons.Records(&obs, vc.Status.Addons, now.Add(20*time.Second))
	obs = d.Reconcile(ctx, addons.Target{VCOCluster: vc, ClusterName: "prod"}, now.Add(time.Minute))
	if !obs.Addons[0].Applied {
		t.Fatalf("a rotated credential was not applied: %+v", obs.Addons[0])
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: addons.CCMCredentialsSecret}, sec); err != nil || string(sec.Data[vco.SecretKeyJWT]) != "rotated" {
		t.Fatalf("credential copy after rotation: %v", err)
	}
}

// TestCSIDriverSettings: the CSI add-on is skipped without spec.addons.csi (and says that
// spec.encryption is then not acted on); with it, a missing credential Secret or an incomplete
// external vault fails with the field to fix, and spec.encryption lands in the driver's config.
func TestCSIDriverSettings(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	create(t, kubeconfigSecret(t, ns, "prod"))
	d := &addons.Delivery{Management: env.Client, Registry: addons.Registry{addons.CSIDriver{}},
		Manager: addons.Settings{Version: "v1.2.3", ImageRepository: "registry.example/capx"}}
	vc := vcoCluster(ns, "prod")
	vc.Spec.Encryption = &capvcov1.EncryptionSpec{VaultMode: "external", VaultAddress: "https://vault.example.com:8200"}
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	at := addons.Target{VCOCluster: vc, ClusterName: "prod"}

	if o := d.Reconcile(ctx, at, now).Addons[0]; !strings.Contains(o.Skip, "spec.encryption is not acted on") {
		t.Fatalf("without spec.addons.csi: %+v", o)
	}
	vc.Spec.Addons.CSI = &capvcov1.CSIAddonSpec{CredentialsSecretRef: corev1.LocalObjectReference{Name: "csi-credentials"}}
	if o := d.Reconcile(ctx, at, now).Addons[0]; o.Err == nil || !strings.Contains(o.Err.Error(), "spec.encryption.transitKey") ||
		!strings.Contains(o.Err.Error(), "spec.encryption.vaultTokenSecretRef") {
		t.Fatalf("external vault without key and token: %+v", o)
	}
	vc.Spec.Encryption.TransitKey = "capvco"
	vc.Spec.Encryption.VaultTokenSecretRef = &corev1.LocalObjectReference{Name: "vault-token"}
	if o := d.Reconcile(ctx, at, now).Addons[0]; o.Err == nil || !strings.Contains(o.Err.Error(), "spec.addons.csi.credentialsSecretRef") {
		t.Fatalf("missing credential Secret: %+v", o)
	}
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "csi-credentials"}, Data: map[string][]byte{
		vco.SecretKeyURL: []byte("https://vco.example.com/api/1"), vco.SecretKeyCustomer: []byte("acme"), vco.SecretKeyJWT: []byte("t")}})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vault-token"}, Data: map[string][]byte{"token": []byte("s.vault")}})
	o := d.Reconcile(ctx, at, now).Addons[0]
	if o.Err != nil || !o.Applied {
		t.Fatalf("complete settings: %+v", o)
	}
	// envtest serves no snapshot CRDs: the VolumeSnapshotClass waits for them, the driver does not.
	if len(o.NotServed) != 1 || !strings.Contains(o.NotServed[0], "VolumeSnapshotClass capvco-disk (the cluster does not serve snapshot.storage.k8s.io/v1)") {
		t.Errorf("not served: %v", o.NotServed)
	}
	var cms corev1.ConfigMapList
	if err := env.Client.List(ctx, &cms, client.InNamespace("kube-system"), client.MatchingLabels{addons.NameLabel: "csi-driver"}); err != nil {
		t.Fatal(err)
	}
	var cfg string
	for _, cm := range cms.Items {
		for _, v := range cm.Data {
			cfg += v
		}
	}
	if !strings.Contains(cfg, "vault.example.com:8200") || !strings.Contains(cfg, "capvco") {
		t.Errorf("the driver's config lacks spec.encryption:\n%s", cfg)
	}
	tok := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: addons.CSIVaultTokenSecret}, tok); err != nil || string(tok.Data["token"]) != "s.vault" {
		t.Fatalf("vault token copy: %v", err)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
