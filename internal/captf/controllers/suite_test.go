package controllers_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/testenv/mgrtest"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	parallelUnlessAsked(scenarioParallel)
	os.Exit(testenv.Run(m, testenv.Options{ControllerManager: true}, &env))
}

// scenarioParallel is how many scenario tests run at once unless -parallel says otherwise. A
// scenario spends most of its time waiting (on the Job controller, the kubelet stand-in's poll,
// the manager's watches): at go test's default, GOMAXPROCS (2 on CI), the package used under one
// core of two. The scenarios share nothing but the API server (each has its own namespace,
// manager and kubelet) and wait on what the manager does, never on a time bound; 4, not more,
// so that each one's waits keep their margin on a loaded 2-core machine.
const scenarioParallel = 4

// parallelUnlessAsked sets -test.parallel to n when the command line did not set it.
func parallelUnlessAsked(n int) {
	asked := false
	flag.Visit(func(f *flag.Flag) { asked = asked || f.Name == "test.parallel" })
	if !asked {
		_ = flag.Set("test.parallel", fmt.Sprint(n))
	}
}

// moduleImages maps the module images the tests use to the offline test modules.
func moduleImages(image string) (string, error) {
	for _, role := range []string{"machinepool", "machine", "cluster"} {
		if strings.Contains(image, "/"+role+":") {
			return filepath.Join(env.Root, "test", "modules", role), nil
		}
	}
	return "", fmt.Errorf("no test module for image %s", image)
}

const (
	clusterImage = "capx.test/modules/cluster:v1"
	machineImage = "capx.test/modules/machine:v1"
	poolImage    = "capx.test/modules/machinepool:v1"
)

// startManager runs the real manager (CAPTF only) against the test API server, with a kubelet
// stand-in running the real runner for every Job's Pod.
func startManager(t testing.TB, flags ...string) *testenv.Kubelet {
	t.Helper()
	return startManagerIn(t, "", flags...)
}

// startManagerIn is startManager watching one namespace only ("" for all), with a kubelet for
// that namespace's Pods only: tests in their own namespaces then run in parallel.
func startManagerIn(t testing.TB, namespace string, flags ...string) *testenv.Kubelet {
	t.Helper()
	kubelet := env.StartKubeletIn(t, namespace, moduleImages)
	// No destroy namespace unless a test names its own: managers of tests running in parallel
	// would share the default one.
	mgrtest.Start(t, env, append([]string{"--providers=captf", "--drift-interval=0", "--namespace=" + namespace, "--destroy-namespace-prefix="}, flags...)...)
	return kubelet
}

// ownedBy sets a controller owner reference the way CAPI's controllers do.
func ownedBy(obj, owner client.Object, kind string) {
	obj.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: clusterv1.GroupVersion.String(), Kind: kind,
		Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true),
	}})
}

func create(t testing.TB, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// waitFor polls an object until ok holds, failing with its conditions otherwise.
func waitFor[T capi.Object](t *testing.T, obj T, timeout time.Duration, what string, ok func(T) bool) {
	t.Helper()
	mgrtest.WaitFor(t, env, obj, timeout, what, ok)
}

func describe(o capi.Object) string { return mgrtest.Describe(o) }

func provisioned(init captfv1.InitializationStatus) bool { return ptr.Deref(init.Provisioned, false) }

// backedUp: status.stateBackups lists a backup of serial.
func backedUp(o *captfv1.TerraformCluster, serial int64) bool {
	return slices.ContainsFunc(o.Status.StateBackups, func(b captfv1.StateBackup) bool { return b.Serial == serial })
}

func gone(t *testing.T, o client.Object, timeout time.Duration) {
	t.Helper()
	mgrtest.Gone(t, env, o, timeout)
}

// jobsOf lists the Jobs of an object's kind and name, newest last.
func jobsOf(t *testing.T, ns, kind, name string) []batchv1.Job {
	t.Helper()
	list := &batchv1.JobList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{
		captfv1.OwnerKindLabel: kind, captfv1.OwnerNameLabel: name,
	}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

var approverRole sync.Once

// asApprover is a client for a user who holds, in ns, the documented plan approver role
// (config/rbac/plan_approver_role.yaml) and nothing else.
func asApprover(t *testing.T, ns string) client.Client {
	t.Helper()
	ctx := context.Background()
	var err error
	approverRole.Do(func() { err = env.Apply(ctx, filepath.Join(env.Root, "config", "rbac", "plan_approver_role.yaml")) })
	if err != nil {
		t.Fatal(err)
	}
	user := "approver-" + ns
	create(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plan-approvers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "capx-captf-plan-approver"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
