// Package move is `kubectl captf move preflight|register-inventory`: the shared
// internal/cli/move commands with CAPTF's own checks (no Job running, what of the credential and
// variable sources move leaves behind, and that it is on the target) and CRDs.
package move

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/decide"
	"github.com/capx-io/capx/internal/captf/movelabel"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
	climove "github.com/capx-io/capx/internal/cli/move"
)

// CRDs are CAPTF's CRDs, which clusterctl move must discover.
var CRDs = []string{
	"terraformclusters.infrastructure.cluster.x-k8s.io",
	"terraformmachinepools.infrastructure.cluster.x-k8s.io",
	"terraformmachinepoolmachines.infrastructure.cluster.x-k8s.io",
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
// sources) either move with the cluster or exist on the target.
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
	return append(checks, checkSources(ctx, src, dst, t.Namespace, secrets, configMaps))
}

// checkSources says which Secrets and ConfigMaps the objects read clusterctl move leaves
// behind, and fails unless each of them is on the target already. A Secret moves when it
// carries clusterctl's move label (the manager sets it on a credentials Secret nothing that
// stays behind reads: decide.CredentialMoveOf); one the manager labelled that something staying
// behind reads now (its label comes off at the next reconcile) fails too: move would take it
// from what stays.
func checkSources(ctx context.Context, src, dst client.Client, namespace string, secrets, configMaps map[string]bool) climove.Check {
	const name = "credential and variable sources on the target"
	var behind []climove.LeftBehind
	var taken []string
	moving := 0
	for _, kind := range []string{"Secret", "ConfigMap"} {
		names := sortedKeys(secrets)
		if kind == "ConfigMap" {
			names = sortedKeys(configMaps)
		}
		for _, n := range names {
			meta := &metav1.PartialObjectMetadata{}
			meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
			key := client.ObjectKey{Namespace: namespace, Name: n}
			if err := src.Get(ctx, key, meta); err != nil {
				if !apierrors.IsNotFound(err) {
					return climove.Check{Name: name, Message: fmt.Sprintf("read %s %s on the source: %v", kind, key, err)}
				}
				meta = nil
			}
			reason := "not found on the source"
			if meta != nil {
				_, labelled := meta.GetLabels()[clusterctlv1.ClusterctlMoveLabel]
				reason = fmt.Sprintf("it has no %s label", clusterctlv1.ClusterctlMoveLabel)
				if kind == "Secret" {
					uses, err := movelabel.Uses(ctx, src, src, namespace, n, false)
					if err != nil {
						return climove.Check{Name: name, Message: fmt.Sprintf("find what reads Secret %s: %v", key, err)}
					}
					d := decide.CredentialMoveOf(movelabel.Input(meta, uses))
					if labelled && d.Action == decide.MoveLabelRemove {
						taken = append(taken, fmt.Sprintf("Secret %s (%s)", n, d.Reason))
						continue
					}
					if !labelled && d.Reason != "" {
						reason = d.Reason
					}
				}
				if labelled {
					moving++
					continue
				}
			}
			lb := climove.LeftBehind{Kind: kind, Name: n, Reason: reason}
			obj := &metav1.PartialObjectMetadata{}
			obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
			switch err := dst.Get(ctx, key, obj); {
			case err == nil:
				lb.OnTarget = true
			case !apierrors.IsNotFound(err):
				return climove.Check{Name: name, Message: fmt.Sprintf("read %s %s on the target: %v", kind, key, err)}
			}
			behind = append(behind, lb)
		}
	}
	var missing, present []string
	for _, lb := range behind {
		if lb.OnTarget {
			present = append(present, fmt.Sprintf("%s %s (%s)", lb.Kind, lb.Name, lb.Reason))
		} else {
			missing = append(missing, fmt.Sprintf("%s %s (%s)", lb.Kind, lb.Name, lb.Reason))
		}
	}
	c := climove.Check{Name: name, LeftBehind: behind, Passed: len(missing) == 0 && len(taken) == 0}
	switch {
	case len(taken) > 0:
		c.Message = fmt.Sprintf("move would take from what stays behind: %s; remove the label (kubectl label secret <name> -n %s %s-) or wait for the manager to", strings.Join(taken, "; "), namespace, clusterctlv1.ClusterctlMoveLabel)
	case len(missing) > 0:
		c.Message = fmt.Sprintf("left behind and missing on the target: %s; copy them to the target first", strings.Join(missing, "; "))
	case len(present) > 0:
		c.Message = fmt.Sprintf("%d move with the cluster; left behind, present on the target: %s", moving, strings.Join(present, "; "))
	default:
		c.Message = fmt.Sprintf("%d move with the cluster, none left behind", moving)
	}
	return c
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
