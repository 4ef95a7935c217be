package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/manager"
	"github.com/capx-io/capx/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{ControllerManager: true}, &env))
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
func startManager(t *testing.T, flags ...string) *testenv.Kubelet {
	t.Helper()
	kubelet := env.StartKubelet(t, moduleImages)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	manager.AddFlags(fs)
	args := append([]string{"--providers=captf", "--runner-image=capx.test/manager:dev",
		"--metrics-bind-address=0", "--health-addr=0", "--drift-interval=0"}, flags...)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	v := viper.New()
	_ = v.BindPFlags(fs)
	opts, err := manager.Load(v)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := manager.New(ctx, env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped with %v", err)
		}
	})
	return kubelet
}

// ownedBy sets a controller owner reference the way CAPI's controllers do.
func ownedBy(obj, owner client.Object, kind string) {
	obj.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: clusterv1.GroupVersion.String(), Kind: kind,
		Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true),
	}})
}

func create(t *testing.T, objs ...client.Object) {
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
	NewWithT(t).Eventually(func() bool {
		return env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj) == nil && ok(obj)
	}, timeout, 200*time.Millisecond).Should(BeTrue(), func() string {
		return fmt.Sprintf("%T %s: want %s; conditions:\n%s", obj, obj.GetName(), what, describe(obj))
	})
}

func describe(o capi.Object) string {
	var b strings.Builder
	if st, err := json.Marshal(o.(interface{ GetConditions() []metav1.Condition })); err == nil && os.Getenv("CAPX_TEST_DUMP") != "" {
		fmt.Fprintf(&b, "  object: %s\n", st)
	}
	for _, c := range o.GetConditions() {
		fmt.Fprintf(&b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func provisioned(init captfv1.InitializationStatus) bool { return ptr.Deref(init.Provisioned, false) }

func gone(t *testing.T, o client.Object, timeout time.Duration) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o))
	}, timeout, 200*time.Millisecond).Should(BeTrue(), "%T %s still exists (finalizers %v)", o, o.GetName(), o.GetFinalizers())
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
