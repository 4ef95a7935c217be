package controllers

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/movelabel"
)

// indexCredentials registers movelabel.CredentialsIndex on the cached TerraformClusters,
// TerraformMachines and TerraformMachinePools: the labelCredentials phase lists the readers of
// one Secret, not every CAPTF object of the namespace (which made a pass over n objects O(n²)).
func indexCredentials(ctx context.Context, mgr ctrl.Manager) error {
	for _, o := range []client.Object{&captfv1.TerraformCluster{}, &captfv1.TerraformMachine{}, &captfv1.TerraformMachinePool{}} {
		if err := mgr.GetFieldIndexer().IndexField(ctx, o, movelabel.CredentialsIndex, movelabel.CredentialsNamed); err != nil {
			return err
		}
	}
	return nil
}

// credentialsToLabel is the Secret this pass decides the move label of, or "". A TerraformCluster
// decides for its own credentials and for its members' default ones; a machine or pool only for
// a Secret its own spec names that its TerraformCluster does not already cover. So the decision,
// which lists the namespace's Pods, runs once per cluster reconcile rather than once per machine.
func credentialsToLabel(owner string, spec *captfv1.WorkspaceSpec, object client.Object, tc *captfv1.TerraformCluster) []string {
	if owner == captfv1.KindCluster {
		if c, ok := object.(*captfv1.TerraformCluster); ok {
			return movelabel.CredentialsNamed(c)
		}
		return nil
	}
	if spec.CredentialsRef == nil || spec.CredentialsRef.Name == "" {
		return nil
	}
	if tc != nil {
		for _, covered := range movelabel.CredentialsNamed(tc) {
			if covered == spec.CredentialsRef.Name {
				return nil
			}
		}
	}
	return []string{spec.CredentialsRef.Name}
}
