package manifests

import (
	"context"
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/capx-io/capx/internal/capvco/ccm/config"
	"github.com/capx-io/capx/internal/manifest"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/podcheck"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, testenv.Options{}, &env)) }

var opts = Options{
	Image: "registry.example.com/capvco-cloud-controller-manager:v1.0.0", CredentialsSecret: "capvco-ccm-credentials",
	Cluster: config.Cluster{Namespace: "team-a", Name: "prod"},
	Sites:   []config.Site{{Name: "primary", Location: "nl-rmd-dc01-001"}, {Name: "west", Location: "be-mac-dc01-001", CloudspaceID: "cs-7"}},
}

func TestRenderRefuses(t *testing.T) {
	for name, o := range map[string]Options{
		"no image":   {CredentialsSecret: "s", Cluster: opts.Cluster, Sites: opts.Sites},
		"bad secret": {Image: "i", CredentialsSecret: "Bad_Name", Cluster: opts.Cluster, Sites: opts.Sites},
		"no sites":   {Image: "i", CredentialsSecret: "s", Cluster: opts.Cluster},
	} {
		if _, err := Render(o); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// TestApply renders the manifests, applies them to a real API server, and checks that the
// cloud-config they carry is one the CCM accepts, that the Deployment stays on control-plane
// nodes with the credential mounted where the cloud-config says, and that the ServiceAccount
// may do what the controllers do (and no more than it needs on Secrets).
func TestApply(t *testing.T) {
	stream, err := Render(opts)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Objects(stream)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var dep appsv1.Deployment
	var cm corev1.ConfigMap
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		switch o.GetKind() {
		case "Deployment":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &dep); err != nil {
				t.Fatal(err)
			}
		case "ConfigMap":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg, err := config.Parse([]byte(cm.Data["cloud-config.yaml"]))
	if err != nil {
		t.Fatalf("the rendered cloud-config is refused: %v\n%s", err, cm.Data["cloud-config.yaml"])
	}
	if cfg.CredentialsDir != CredentialsDir || cfg.Cluster != opts.Cluster || len(cfg.Sites) != 2 || cfg.Sites[1].CloudspaceID != "cs-7" {
		t.Errorf("cloud-config = %+v", cfg)
	}
	spec := dep.Spec.Template.Spec
	if _, ok := spec.NodeSelector["node-role.kubernetes.io/control-plane"]; !ok {
		t.Errorf("not pinned to control-plane nodes: %v", spec.NodeSelector)
	}
	if err := podcheck.SecretsReadable(spec); err != nil {
		t.Error(err)
	}
	for _, key := range []string{"node-role.kubernetes.io/control-plane", "node.cloudprovider.kubernetes.io/uninitialized"} {
		found := false
		for _, tol := range spec.Tolerations {
			found = found || tol.Key == key
		}
		if !found {
			t.Errorf("no toleration of %s: it could not run on the nodes it must initialise", key)
		}
	}
	c := spec.Containers[0]
	if c.Image != opts.Image || !contains(c.Args, "--cloud-config=/etc/capvco/cloud-config.yaml") {
		t.Errorf("container = %s %v", c.Image, c.Args)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || m.MountPath == CredentialsDir
	}
	if !mounted || spec.Volumes[1].Secret == nil || spec.Volumes[1].Secret.SecretName != opts.CredentialsSecret {
		t.Errorf("the credential Secret is not mounted at %s: %+v", CredentialsDir, spec.Volumes)
	}

	sa := "system:serviceaccount:kube-system:capvco-cloud-controller-manager"
	for _, tc := range []struct {
		ns, group, resource, sub, verb string
		allowed                        bool
	}{
		{"", "", "nodes", "", "delete", true},
		{"", "", "nodes", "status", "patch", true},
		{"", "", "nodes", "", "update", true},
		{"default", "", "services", "", "patch", true},
		{"default", "", "services", "status", "patch", true},
		{"default", "", "events", "", "create", true},
		{"kube-system", "coordination.k8s.io", "leases", "", "update", true},
		{"default", "coordination.k8s.io", "leases", "", "update", false},
		{"kube-system", "", "configmaps", "", "get", false}, // only extension-apiserver-authentication, by name
		{"default", "", "secrets", "", "get", false},
		{"default", "", "pods", "", "delete", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: sa,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: tc.ns, Group: tc.group, Resource: tc.resource, Subresource: tc.sub, Verb: tc.verb}}}
		if err := env.Client.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.allowed {
			t.Errorf("%s %s/%s in %q: allowed=%v, want %v", tc.verb, tc.resource, tc.sub, tc.ns, sar.Status.Allowed, tc.allowed)
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if strings.TrimSpace(x) == v {
			return true
		}
	}
	return false
}
