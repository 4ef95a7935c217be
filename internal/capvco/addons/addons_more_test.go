package addons_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/addons"
	ednsmanifests "github.com/capx-io/capx/internal/capvco/externaldns/manifests"
	"github.com/capx-io/capx/internal/capvco/gpuaddon"
	"github.com/capx-io/capx/internal/capvco/sriov"
	"github.com/capx-io/capx/internal/vco"
)

// reconcile runs one pass and records it in status, as the VCOCluster controller does.
func reconcile(d *addons.Delivery, vc *capvcov1.VCOCluster, now time.Time) addons.Outcome {
	obs := d.Reconcile(context.Background(), addons.Target{VCOCluster: vc, ClusterName: "prod"}, now)
	vc.Status.Addons = addons.Records(&obs, vc.Status.Addons, now)
	return obs.Addons[0]
}

// gone says whether an object no longer exists or is being deleted (envtest runs no namespace
// controller, so a deleted Namespace stays Terminating).
func gone(t *testing.T, o client.Object) bool {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o)
	if apierrors.IsNotFound(err) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.GetDeletionTimestamp() != nil
}

// markAvailable reports a DaemonSet rolled out on n nodes, as its controller would.
func markAvailable(t *testing.T, key client.ObjectKey, n int32) {
	t.Helper()
	ds := &appsv1.DaemonSet{}
	if err := env.Client.Get(context.Background(), key, ds); err != nil {
		t.Fatal(err)
	}
	ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: n, CurrentNumberScheduled: n,
		NumberReady: n, NumberAvailable: n, UpdatedNumberScheduled: n}
	if err := env.Client.Status().Update(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
}

// TestGPUAddonDelivered: without spec.addons.gpu nothing is installed and the message says
// why; nvidia applies NVIDIA's device plugin (the image override honoured) and the RuntimeClass,
// available once the DaemonSet is; none removes both and drops the record.
func TestGPUAddonDelivered(t *testing.T) {
	ns := env.NewNamespace(t)
	create(t, kubeconfigSecret(t, ns, "prod"))
	d := &addons.Delivery{Management: env.Client, Registry: addons.Registry{addons.GPU{}},
		Manager: addons.Settings{Version: "v1.2.3", ImageRepository: "registry.example/capx",
			Images: map[string]string{"nvidia-device-plugin": "mirror.example/k8s-device-plugin:v0.17.1"}}}
	vc := vcoCluster(ns, "prod")
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)

	if o := reconcile(d, vc, now); !strings.Contains(o.Skip, "spec.addons.gpu is not set") || o.Checked {
		t.Fatalf("without spec.addons.gpu: %+v", o)
	}
	vc.Spec.Addons.GPU = &capvcov1.GPUAddonSpec{}
	o := reconcile(d, vc, now)
	if o.Err != nil || !o.Applied || o.Available || len(o.Unavailable) != 1 || !strings.Contains(o.Unavailable[0], "DaemonSet kube-system/nvidia-device-plugin") {
		t.Fatalf("nvidia (the default): %+v", o)
	}
	ds := &appsv1.DaemonSet{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "kube-system", Name: "nvidia-device-plugin"}, ds); err != nil {
		t.Fatal(err)
	}
	if img := ds.Spec.Template.Spec.Containers[0].Image; img != "mirror.example/k8s-device-plugin:v0.17.1" {
		t.Errorf("device plugin image %s", img)
	}
	if sel := ds.Spec.Template.Spec.NodeSelector; sel[gpuaddon.AcceleratorLabel] != "nvidia" {
		t.Errorf("device plugin node selector %v", sel)
	}
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: gpuaddon.RuntimeClassName}}
	if gone(t, rc) || rc.Handler != gpuaddon.RuntimeHandler || rc.Labels[addons.NameLabel] != "gpu" {
		t.Fatalf("RuntimeClass: %+v", rc)
	}
	markAvailable(t, client.ObjectKeyFromObject(ds), 0)
	if o := reconcile(d, vc, now.Add(20*time.Second)); !o.Checked || !o.Available {
		t.Fatalf("after the rollout: %+v", o)
	}

	vc.Spec.Addons.GPU.Addon = "none"
	o = reconcile(d, vc, now.Add(time.Minute))
	if !o.Removed || o.Err != nil || !strings.Contains(o.Skip, "spec.addons.gpu.addon is none") || len(vc.Status.Addons) != 0 {
		t.Fatalf("none: %+v, records %+v", o, vc.Status.Addons)
	}
	if !gone(t, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "nvidia-device-plugin"}}) ||
		!gone(t, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: gpuaddon.RuntimeClassName}}) {
		t.Fatal("none left the nvidia add-on's objects")
	}
	// Nothing recorded: the next pass asks the workload cluster nothing.
	if o := reconcile(d, vc, now.Add(2*time.Minute)); o.Checked || o.Removing {
		t.Fatalf("after the removal: %+v", o)
	}
	vc.Spec.Addons.GPU.Addon = "amd"
	if o := reconcile(d, vc, now); o.Err == nil || !strings.Contains(o.Err.Error(), "spec.addons.gpu.addon") {
		t.Fatalf("an unknown add-on: %+v", o)
	}
}

// TestSRIOVAgentDelivered: enabled, the agent gets its namespace, a copy of its own credential
// (only the credential keys) and its DaemonSet, whose status is handed back for SRIOVAgentReady;
// the cluster's credential is refused by name and as a copy under another name; disabled, what
// was applied is removed, the copied credential first among it.
func TestSRIOVAgentDelivered(t *testing.T) {
	ns := env.NewNamespace(t)
	create(t, kubeconfigSecret(t, ns, "prod"))
	cred := func(name, token string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{
			vco.SecretKeyURL: []byte("https://vco.example.com/api/1"), vco.SecretKeyCustomer: []byte("acme"),
			vco.SecretKeyJWT: []byte(token), "note": []byte("not for the nodes")}}
	}
	create(t, cred("vco-credentials", "cluster-token"))
	create(t, cred("copy-of-cluster", "cluster-token"))
	create(t, cred("sriov-credentials", "sriov-token"))
	d := &addons.Delivery{Management: env.Client, Registry: addons.Registry{addons.SRIOVAgent{}},
		Manager: addons.Settings{Version: "v1.2.3", ImageRepository: "registry.example/capx", Platform: policy}}
	vc := vcoCluster(ns, "prod")
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)

	if o := reconcile(d, vc, now); o.Skip != "spec.sriov.enabled is not set" {
		t.Fatalf("not enabled: %+v", o)
	}
	vc.Spec.SRIOV = &capvcov1.SRIOVSpec{Enabled: true}
	if o := reconcile(d, vc, now); o.Err == nil || !strings.Contains(o.Err.Error(), "without spec.sriov.credentialSecretRef") {
		t.Fatalf("without a credential: %+v", o)
	}
	for name, says := range map[string]string{"vco-credentials": "names the cluster's own credential", "copy-of-cluster": "holds the same credential as vco-credentials"} {
		vc.Spec.SRIOV.CredentialSecretRef = &corev1.LocalObjectReference{Name: name}
		if o := reconcile(d, vc, now); o.Err == nil || !strings.Contains(o.Err.Error(), says) || strings.Contains(o.Err.Error(), "token") {
			t.Fatalf("credential %s: %+v", name, o)
		}
	}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: sriov.Namespace, Name: addons.SRIOVCredentialsSecret}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused credential was copied: %v", err)
	}

	vc.Spec.SRIOV.CredentialSecretRef = &corev1.LocalObjectReference{Name: "sriov-credentials"}
	o := reconcile(d, vc, now)
	if o.Err != nil || !o.Applied || o.Available {
		t.Fatalf("enabled: %+v", o)
	}
	if ds := o.DaemonSets[addons.SRIOVAgentDaemonSet]; ds == nil || ds.Status.DesiredNumberScheduled != 0 {
		t.Fatalf("the agent's DaemonSet is not handed back: %v", o.DaemonSets)
	}
	sec := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: sriov.Namespace, Name: addons.SRIOVCredentialsSecret}, sec); err != nil {
		t.Fatal(err)
	}
	if _, leaked := sec.Data["note"]; leaked || string(sec.Data[vco.SecretKeyJWT]) != "sriov-token" {
		t.Errorf("credential copy keys %v", keys(sec.Data))
	}
	ds := &appsv1.DaemonSet{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: sriov.Namespace, Name: "capvco-sriov-agent"}, ds); err != nil {
		t.Fatal(err)
	}
	if img := ds.Spec.Template.Spec.Containers[0].Image; img != "registry.example/capx/capvco-sriov-agent:v1.2.3" ||
		!slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--cloudspace-id=cs-1") {
		t.Errorf("agent %s %v", img, ds.Spec.Template.Spec.Containers[0].Args)
	}
	hasPolicy(t, "the agent", ds.Spec.Template.Spec.Containers[0].Args)
	markAvailable(t, client.ObjectKeyFromObject(ds), 2)
	o = reconcile(d, vc, now.Add(20*time.Second))
	if ds := o.DaemonSets[addons.SRIOVAgentDaemonSet]; !o.Available || ds == nil || ds.Status.NumberAvailable != 2 {
		t.Fatalf("after the rollout: %+v", o)
	}

	vc.Spec.SRIOV.Enabled = false
	if o := reconcile(d, vc, now.Add(time.Minute)); !o.Removed || o.Err != nil {
		t.Fatalf("disabled: %+v", o)
	}
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sriov.Namespace, Name: addons.SRIOVCredentialsSecret}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: sriov.Namespace, Name: "capvco-sriov-agent"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "capvco-sriov-agent"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sriov.Namespace}},
	} {
		if !gone(t, obj) {
			t.Errorf("disabled, %T %s stays", obj, obj.GetName())
		}
	}
}

// policy is a manager's endpoint policy for a simulator in the management cluster.
var policy = addons.Platform{AllowHTTP: true, AllowedHosts: []string{"vcosim.capvco-system.svc:8080"}}

// hasPolicy checks that an add-on that takes its settings as flags got the manager's policy
// (without it, an in-cluster simulator over http is refused and the add-on never starts).
func hasPolicy(t *testing.T, what string, args []string) {
	t.Helper()
	for _, want := range []string{"--allow-http", "--allowed-hosts=vcosim.capvco-system.svc:8080"} {
		if !slices.Contains(args, want) {
			t.Errorf("%s lacks the manager's endpoint policy %s: %v", what, want, args)
		}
	}
}

// TestExternalDNSDelivered: external-dns and the webhook in one Pod, with the cluster's
// cloudspaces, domains, sources and owner id, timeouts generous enough for ~30 s platform
// writes, and a copy of the credential (the cluster's by default); unset, it is removed.
func TestExternalDNSDelivered(t *testing.T) {
	ns := env.NewNamespace(t)
	create(t, kubeconfigSecret(t, ns, "prod"))
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vco-credentials"}, Data: map[string][]byte{
		vco.SecretKeyURL: []byte("https://vco.example.com/api/1"), vco.SecretKeyCustomer: []byte("acme"), vco.SecretKeyJWT: []byte("t"),
		"note": []byte("stays home")}})
	d := &addons.Delivery{Management: env.Client, Registry: addons.Registry{addons.ExternalDNS{}},
		Manager: addons.Settings{Version: "v1.2.3", ImageRepository: "registry.example/capx", Platform: policy}}
	vc := vcoCluster(ns, "prod")
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)

	if o := reconcile(d, vc, now); o.Skip != "spec.addons.externalDNS is not set" {
		t.Fatalf("unset: %+v", o)
	}
	vc.Spec.Addons.ExternalDNS = &capvcov1.ExternalDNSAddonSpec{DomainFilters: []string{"apps.example.com"}, ExcludeDomains: []string{"internal.apps.example.com"}, Sources: []string{"service"}}
	o := reconcile(d, vc, now)
	if o.Err != nil || !o.Applied || o.Available {
		t.Fatalf("set: %+v", o)
	}
	dep := &appsv1.Deployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ednsmanifests.Namespace, Name: "external-dns"}, dep); err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 2 || pod.Containers[0].Image != ednsmanifests.DefaultImage || pod.Containers[1].Image != "registry.example/capx/capvco-external-dns-webhook:v1.2.3" {
		t.Fatalf("containers %+v", pod.Containers)
	}
	for _, want := range []string{"--provider=webhook", "--webhook-provider-url=http://127.0.0.1:8888", "--webhook-provider-read-timeout=10m0s",
		"--webhook-provider-write-timeout=10m0s", "--txt-owner-id=capvco-" + ns + "-prod", "--registry=txt", "--source=service",
		"--domain-filter=apps.example.com", "--exclude-domains=internal.apps.example.com"} {
		if !slices.Contains(pod.Containers[0].Args, want) {
			t.Errorf("external-dns lacks %s: %v", want, pod.Containers[0].Args)
		}
	}
	if slices.Contains(pod.Containers[0].Args, "--source=ingress") {
		t.Errorf("sources not honoured: %v", pod.Containers[0].Args)
	}
	for _, want := range []string{"--cloudspace-id=cs-1", "--domain-filter=apps.example.com", "--exclude-domains=internal.apps.example.com", "--listen=127.0.0.1:8888"} {
		if !slices.Contains(pod.Containers[1].Args, want) {
			t.Errorf("the webhook lacks %s: %v", want, pod.Containers[1].Args)
		}
	}
	hasPolicy(t, "the webhook", pod.Containers[1].Args)
	sec := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ednsmanifests.Namespace, Name: addons.ExternalDNSCredentialsSecret}, sec); err != nil {
		t.Fatal(err)
	}
	if _, leaked := sec.Data["note"]; leaked || string(sec.Data[vco.SecretKeyCustomer]) != "acme" {
		t.Errorf("credential copy keys %v", keys(sec.Data))
	}

	vc.Spec.Addons.ExternalDNS = nil
	if o := reconcile(d, vc, now.Add(time.Minute)); !o.Removed || o.Err != nil {
		t.Fatalf("unset again: %+v", o)
	}
	for _, obj := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ednsmanifests.Namespace, Name: "external-dns"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ednsmanifests.Namespace, Name: addons.ExternalDNSCredentialsSecret}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "capvco-external-dns"}},
	} {
		if !gone(t, obj) {
			t.Errorf("unset, %T %s stays", obj, obj.GetName())
		}
	}
}

// TestRemovalWaitsForTheWorkloadCluster: an add-on a cluster stopped asking for keeps its record
// while the workload cluster cannot be reached, so the removal is not forgotten.
func TestRemovalWaitsForTheWorkloadCluster(t *testing.T) {
	ns := env.NewNamespace(t)
	d := &addons.Delivery{Management: env.Client, Registry: addons.Registry{addons.GPU{}}, Manager: addons.Settings{Version: "v1"}}
	vc := vcoCluster(ns, "prod")
	vc.Status.Addons = []capvcov1.AddonStatus{{Name: "gpu", Version: "v1", Available: true}}
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	obs := d.Reconcile(context.Background(), addons.Target{VCOCluster: vc, ClusterName: "prod"}, now)
	if o := obs.Addons[0]; !o.Removing || o.Removed || obs.Requeue != 15*time.Second {
		t.Fatalf("unreachable: %+v requeue %v", o, obs.Requeue)
	}
	if recs := addons.Records(&obs, vc.Status.Addons, now); len(recs) != 1 || recs[0].Name != "gpu" {
		t.Fatalf("the record went before the removal: %+v", recs)
	}
}
