package manifests

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/capx-io/capx/internal/capvco/csi/config"
	"github.com/capx-io/capx/internal/manifest"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/podcheck"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, testenv.Options{}, &env)) }

var opts = Options{
	Images: Images{Driver: "registry.example.com/capvco-csi-driver:v1.0.0", Provisioner: "registry.example.com/csi-provisioner:v5",
		Attacher: "registry.example.com/csi-attacher:v4", Resizer: "registry.example.com/csi-resizer:v1", Snapshotter: "registry.example.com/csi-snapshotter:v8",
		Registrar: "registry.example.com/csi-node-driver-registrar:v2"},
	CredentialsSecret: "capvco-csi-credentials",
	Cluster:           config.Cluster{Namespace: "team-a", Name: "prod"},
	Sites:             []config.Site{{Name: "primary", Location: "nl-rmd-dc01-001"}},
	Encryption: config.Encryption{VaultMode: config.VaultExternal, Transit: &config.Transit{Address: "https://vault.example.com:8200",
		Key: "capvco-volumes", TokenFile: "/ignored"}},
	TransitTokenSecret: "capvco-csi-vault-token",
}

func TestRenderRefuses(t *testing.T) {
	noImage := opts
	noImage.Images.Snapshotter = ""
	noToken := opts
	noToken.TransitTokenSecret = ""
	managed := opts
	managed.Encryption = config.Encryption{VaultMode: config.VaultManaged}
	for name, o := range map[string]Options{"no snapshotter image": noImage, "no vault token Secret": noToken, "managed vault": managed} {
		if _, err := Render(o); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// snapshotClassCRD stands in for the external-snapshotter's VolumeSnapshotClass CRD, which
// the workload cluster's snapshot-controller install brings; envtest has none.
func snapshotClassCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "volumesnapshotclasses.snapshot.storage.k8s.io",
			Annotations: map[string]string{"api-approved.kubernetes.io": "unapproved, a test stand-in for the external-snapshotter CRD"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "snapshot.storage.k8s.io", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "volumesnapshotclasses", Singular: "volumesnapshotclass", Kind: "VolumeSnapshotClass", ListKind: "VolumeSnapshotClassList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}}}}}}
}

func ptr[T any](v T) *T { return &v }

// TestApply renders the manifests, applies them to a real API server and checks what they
// promise: configs the driver accepts (the node's without a credential), the sidecars and
// driver in the controller Deployment on control-plane nodes with the credential mounted only
// there, the node plugin privileged with the kubelet directory shared, StorageClasses that
// wait for the consumer, and RBAC that lets the sidecars work and no more on Secrets.
func TestApply(t *testing.T) {
	ctx := context.Background()
	if err := env.Client.Create(ctx, snapshotClassCRD()); err != nil {
		t.Fatal(err)
	}
	stream, err := Render(opts)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Objects(stream)
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	var ds appsv1.DaemonSet
	cms := map[string]corev1.ConfigMap{}
	kinds := map[string]int{}
	for _, o := range objs {
		err := env.Client.Create(ctx, o)
		for i := 0; err != nil && o.GetKind() == "VolumeSnapshotClass" && i < 50; i++ {
			time.Sleep(100 * time.Millisecond) // the CRD becomes served
			err = env.Client.Create(ctx, o)
		}
		if err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		kinds[o.GetKind()]++
		var into any
		switch o.GetKind() {
		case "Deployment":
			into = &dep
		case "DaemonSet":
			into = &ds
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cm); err != nil {
				t.Fatal(err)
			}
			cms[cm.Name] = cm
		}
		if into != nil {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
				t.Fatal(err)
			}
		}
	}
	if kinds["StorageClass"] != 2 || kinds["VolumeSnapshotClass"] != 1 || kinds["CSIDriver"] != 1 {
		t.Errorf("objects = %v", kinds)
	}
	ctrlCfg, err := config.Parse([]byte(cms["capvco-csi-controller"].Data["csi.yaml"]))
	if err != nil || ctrlCfg.CredentialsDir != CredentialsDir || ctrlCfg.Encryption.Transit.TokenFile != VaultTokenDir+"/token" {
		t.Errorf("controller config %+v: %v", ctrlCfg, err)
	}
	nodeCfg, err := config.Parse([]byte(cms["capvco-csi-node"].Data["csi.yaml"]))
	if err != nil || nodeCfg.CredentialsDir != "" {
		t.Errorf("node config %+v: %v", nodeCfg, err)
	}

	spec := dep.Spec.Template.Spec
	if _, ok := spec.NodeSelector["node-role.kubernetes.io/control-plane"]; !ok {
		t.Errorf("controller not pinned to control-plane nodes: %v", spec.NodeSelector)
	}
	for _, spec := range []corev1.PodSpec{spec, ds.Spec.Template.Spec} {
		if err := podcheck.SecretsReadable(spec); err != nil {
			t.Error(err)
		}
	}
	var images []string
	for _, c := range spec.Containers {
		images = append(images, c.Image)
	}
	for _, want := range []string{opts.Images.Driver, opts.Images.Provisioner, opts.Images.Attacher, opts.Images.Resizer, opts.Images.Snapshotter} {
		if !slices.Contains(images, want) {
			t.Errorf("controller images %v lack %s", images, want)
		}
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.MountPath == CredentialsDir {
				t.Errorf("the node plugin mounts the credential")
			}
			if m.MountPath == "/var/lib/kubelet" && (m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationBidirectional) {
				t.Errorf("the kubelet directory is not shared back to the host")
			}
		}
	}

	for _, tc := range []struct {
		sa, ns, group, resource, sub, verb string
		allowed                            bool
	}{
		{"capvco-csi-controller", "", "", "persistentvolumes", "", "create", true},
		{"capvco-csi-controller", "", "storage.k8s.io", "volumeattachments", "status", "patch", true},
		{"capvco-csi-controller", "default", "", "persistentvolumeclaims", "status", "patch", true},
		{"capvco-csi-controller", "", "snapshot.storage.k8s.io", "volumesnapshotcontents", "status", "update", true},
		{"capvco-csi-controller", "kube-system", "coordination.k8s.io", "leases", "", "update", true},
		{"capvco-csi-controller", "default", "", "secrets", "", "get", false},
		{"capvco-csi-node", "", "", "nodes", "", "get", true},
		{"capvco-csi-node", "", "", "nodes", "", "update", false},
		{"capvco-csi-node", "kube-system", "", "secrets", "", "get", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:serviceaccount:kube-system:" + tc.sa,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: tc.ns, Group: tc.group, Resource: tc.resource, Subresource: tc.sub, Verb: tc.verb}}}
		if err := env.Client.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.allowed {
			t.Errorf("%s: %s %s/%s in %q: allowed=%v, want %v", tc.sa, tc.verb, tc.resource, tc.sub, tc.ns, sar.Status.Allowed, tc.allowed)
		}
	}
}
