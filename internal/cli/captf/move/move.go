// Package move is `kubectl captf move preflight|register-inventory`: the shared
// internal/cli/move commands with CAPTF's own checks (no Job running, credential and variable
// sources present on the target) and CRDs.
package move

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	climove "github.com/capx-io/capx/internal/cli/move"
)

// CRDs are CAPTF's CRDs, which clusterctl move must discover.
var CRDs = []string{
	"terraformclusters.infrastructure.cluster.x-k8s.io",
	"terraformmachinepools.infrastructure.cluster.x-k8s.io",
	"terraformmachines.infrastructure.cluster.x-k8s.io",
	"terraformclustertemplates.infrastructure.cluster.x-k8s.io",
	"terraformmachinepooltemplates.infrastructure.cluster.x-k8s.io",
	"terraformmachinetemplates.infrastructure.cluster.x-k8s.io",
	"terraformplans.infrastructure.cluster.x-k8s.io",
}

// Provider is the capx provider with CAPTF's CRDs.
func Provider() climove.Provider {
	p := climove.Capx
	p.CRDs = CRDs
	return p
}

// NewCmd returns `move`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return climove.NewCmd(f, Provider(), climove.Extension{BlockMoveLists: objects.Lists(), Preflight: Preflight})
}

// Preflight is CAPTF's part of the preflight: no Job runs for any object of the cluster, and
// the Secrets and ConfigMaps the objects read but do not own (credentials, variablesFrom
// sources) exist on the target, since clusterctl move does not carry them.
func Preflight(ctx context.Context, src, dst client.Client, t climove.Target) []climove.Check {
	objs, err := objects.OfCluster(ctx, src, t.Namespace, t.Name)
	if err != nil {
		return []climove.Check{{Name: "no Job running", Message: err.Error()}}
	}
	var running []string
	secrets, configMaps := map[string]bool{}, map[string]bool{}
	for _, o := range objs {
		if j := o.Status.ActiveJob; j != nil {
			running = append(running, fmt.Sprintf("%s (%s Job %s)", o.Ref(), j.Operation, j.Name))
		}
		if r := o.Spec.CredentialsRef; r != nil {
			secrets[r.Name] = true
		}
		if tc, ok := o.Obj.(*captfv1.TerraformCluster); ok && tc.Spec.Defaults != nil && tc.Spec.Defaults.CredentialsRef != nil {
			secrets[tc.Spec.Defaults.CredentialsRef.Name] = true
		}
		for _, v := range o.Spec.VariablesFrom {
			switch {
			case v.Optional:
			case v.SecretRef != nil:
				secrets[v.SecretRef.Name] = true
			case v.ConfigMapRef != nil:
				configMaps[v.ConfigMapRef.Name] = true
			}
		}
	}
	checks := []climove.Check{{Name: "no Job running", Passed: len(running) == 0, Message: fmt.Sprintf("%d CAPTF object(s), none running a Job", len(objs))}}
	if len(running) > 0 {
		sort.Strings(running)
		checks[0].Message = "Jobs run for " + strings.Join(running, ", ") + "; wait until they finish (clusterctl move waits on block-move too)"
	}
	var objsOnTarget []client.Object
	for _, n := range sortedKeys(secrets) {
		objsOnTarget = append(objsOnTarget, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: n}})
	}
	for _, n := range sortedKeys(configMaps) {
		objsOnTarget = append(objsOnTarget, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: n}})
	}
	checks = append(checks, climove.CheckPresent(ctx, dst, "credential and variable sources", objsOnTarget...))
	return checks
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
