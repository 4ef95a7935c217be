package manifests

import (
	"context"
	"os"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/capx-io/capx/internal/capvco/sriov"
	"github.com/capx-io/capx/internal/manifest"
	"github.com/capx-io/capx/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, testenv.Options{}, &env)) }

var opts = Options{Image: "registry.example.com/capvco-sriov:v1.0.0", CredentialsSecret: "capvco-sriov-credentials",
	Cloudspaces: []string{"cs-1", "cs-2"}, Networks: []int{7}}

func TestRenderRefuses(t *testing.T) {
	for name, o := range map[string]Options{
		"no image":       {CredentialsSecret: "s", Cloudspaces: []string{"cs"}},
		"bad secret":     {Image: "i", CredentialsSecret: "Bad_Name", Cloudspaces: []string{"cs"}},
		"no cloudspace":  {Image: "i", CredentialsSecret: "s"},
		"odd cloudspace": {Image: "i", CredentialsSecret: "s", Cloudspaces: []string{"a,b"}},
		"bad network":    {Image: "i", CredentialsSecret: "s", Cloudspaces: []string{"cs"}, Networks: []int{0}},
	} {
		if _, err := Render(o); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// TestApply applies the add-on to a real API server and checks what the docs promise: its own
// namespace, workers only, the credential mounted where the agent reads it, the socket where
// the CNI plugin calls it, and an agent identity that may read Nodes and nothing else.
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
	var ds appsv1.DaemonSet
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if o.GetKind() == "DaemonSet" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
				t.Fatal(err)
			}
		}
		if ns := o.GetNamespace(); ns != "" && ns != sriov.Namespace {
			t.Errorf("%s %s is in namespace %s, not %s", o.GetKind(), o.GetName(), ns, sriov.Namespace)
		}
	}
	spec := ds.Spec.Template.Spec
	req := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
	if req.Key != "node-role.kubernetes.io/control-plane" || req.Operator != "DoesNotExist" {
		t.Errorf("the agent is not kept off control-plane nodes: %+v", req)
	}
	c := spec.Containers[0]
	for _, want := range []string{"--credentials-dir=" + CredentialsDir, "--socket=" + sriov.DefaultSocket, "--cloudspace-id=cs-1", "--cloudspace-id=cs-2", "--external-network-id=7", "--node-name=$(NODE_NAME)"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("agent args %v lack %s", c.Args, want)
		}
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	vols := map[string]bool{}
	for _, v := range spec.Volumes {
		switch {
		case v.Secret != nil:
			vols[v.Name] = v.Secret.SecretName == opts.CredentialsSecret
		case v.HostPath != nil:
			vols[v.Name] = true
		}
	}
	if mounts["credentials"] != CredentialsDir || !vols["credentials"] {
		t.Errorf("the credential Secret %s is not mounted at %s: mounts %v", opts.CredentialsSecret, CredentialsDir, mounts)
	}
	if mounts["socket"] != "/run/capvco-sriov" {
		t.Errorf("the socket directory is mounted at %q, the plugin calls %s", mounts["socket"], sriov.DefaultSocket)
	}
	// The agent installs the plugin itself (the image has no shell): into the node's CNI
	// plugin directory, mounted from the host.
	if len(spec.InitContainers) != 0 {
		t.Errorf("init containers %+v: the image has no shell to run them", spec.InitContainers)
	}
	if mounts["cni-bin"] != "/host/opt/cni/bin" || !slices.Contains(c.Args, "--cni-bin-dir=/host/opt/cni/bin") || !slices.Contains(c.Args, "--install-cni-plugin=/capvco-sriov") {
		t.Errorf("the plugin is not installed into the node's CNI directory: mounts %v, args %v", mounts, c.Args)
	}
	for _, v := range spec.Volumes {
		if v.Name == "cni-bin" && (v.HostPath == nil || v.HostPath.Path != "/opt/cni/bin") {
			t.Errorf("cni-bin is %+v, not the node's /opt/cni/bin", v.VolumeSource)
		}
	}

	sa := "system:serviceaccount:" + sriov.Namespace + ":capvco-sriov-agent"
	for _, tc := range []struct {
		ns, resource, verb string
		allowed            bool
	}{
		{"", "nodes", "get", true},
		{"", "nodes", "list", false},
		{"", "nodes", "patch", false},
		{sriov.Namespace, "secrets", "get", false},
		{"default", "secrets", "list", false},
		{"default", "pods", "get", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: sa,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: tc.ns, Resource: tc.resource, Verb: tc.verb}}}
		if err := env.Client.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.allowed {
			t.Errorf("%s %s in %q: allowed=%v, want %v", tc.verb, tc.resource, tc.ns, sar.Status.Allowed, tc.allowed)
		}
	}
}
