package controllers

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/addons"
)

// deliverAddons applies the add-ons to the workload cluster, once the VCOCluster is
// provisioned (before that there is no control plane to reach). It fails nothing else: what
// failed is in AddonsReady, and the pass is requeued for it.
func (r *clusterProvider) deliverAddons(ctx context.Context, p *clusterPass) error {
	if r.addons == nil || p.vc.Status.Initialization.Provisioned == nil || !*p.vc.Status.Initialization.Provisioned {
		return nil
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("VCOCluster", klog.KObj(p.vc)))
	obs := r.addons.Reconcile(ctx, addons.Target{VCOCluster: p.vc, ClusterName: p.cluster}, p.obs.now)
	p.obs.addons = &obs
	p.requeueAfter(obs.Requeue)
	return nil
}

// setAddonRecords records in status.addons what the delivery applied and found.
func setAddonRecords(vc *capvcov1.VCOCluster, obs *addons.Observed, now metav1.Time) {
	if obs == nil {
		return
	}
	vc.Status.Addons = addons.Records(obs, vc.Status.Addons, now.Time)
}

// setAddonsCondition says which add-ons are installed, at which version, whether their
// workloads are available, which the cluster does not ask for, and what failed.
func setAddonsCondition(vc *capvcov1.VCOCluster, obs *addons.Observed) {
	set := func(status metav1.ConditionStatus, reason, msg string) {
		set(vc, capvcov1.AddonsReadyCondition, status, reason, msg)
	}
	switch {
	case obs == nil && !provisioned(vc):
		set(metav1.ConditionUnknown, capvcov1.ProvisioningReason, "waits for the cluster's infrastructure: add-ons are installed once the control plane runs")
		return
	case obs == nil:
		return // not looked at this pass: the last pass's condition stands
	case obs.Waiting != "":
		set(metav1.ConditionUnknown, capvcov1.WaitingForControlPlaneReason, obs.Waiting)
		return
	}
	var failed, pending, ready, skipped []string
	for _, o := range obs.Addons {
		rec := recordedAddon(vc, o.Name)
		switch {
		case o.Skip != "":
			skipped = append(skipped, fmt.Sprintf("%s not installed (%s)", o.Name, o.Skip))
		case o.Err != nil:
			failed = append(failed, fmt.Sprintf("%s: %v", o.Name, o.Err))
		case o.Checked && !o.Available:
			pending = append(pending, fmt.Sprintf("%s %s applied, waiting for %s", o.Name, o.Version, strings.Join(o.Unavailable, ", ")))
		case !o.Checked && (rec == nil || !rec.Available):
			pending = append(pending, fmt.Sprintf("%s %s not available yet", o.Name, o.Version))
		default:
			ready = append(ready, fmt.Sprintf("%s %s", o.Name, o.Version))
		}
		if len(o.NotServed) > 0 {
			skipped = append(skipped, fmt.Sprintf("%s: not applied, as the cluster does not serve their kind: %s", o.Name, strings.Join(o.NotServed, ", ")))
		}
	}
	var parts []string
	if len(failed) > 0 {
		parts = append(parts, "failed: "+strings.Join(failed, "; "))
	}
	if len(pending) > 0 {
		parts = append(parts, strings.Join(pending, "; "))
	}
	if len(ready) > 0 {
		parts = append(parts, "installed and available: "+strings.Join(ready, ", "))
	}
	parts = append(parts, skipped...)
	msg := strings.Join(parts, "; ")
	switch {
	case len(failed) > 0:
		set(metav1.ConditionFalse, capvcov1.AddonsFailedReason, msg)
	case len(pending) > 0:
		set(metav1.ConditionFalse, capvcov1.AddonsNotAvailableReason, msg)
	default:
		set(metav1.ConditionTrue, capvcov1.ProvisionedReason, msg)
	}
}

func recordedAddon(vc *capvcov1.VCOCluster, name string) *capvcov1.AddonStatus {
	for i := range vc.Status.Addons {
		if vc.Status.Addons[i].Name == name {
			return &vc.Status.Addons[i]
		}
	}
	return nil
}

func provisioned(vc *capvcov1.VCOCluster) bool {
	return vc.Status.Initialization.Provisioned != nil && *vc.Status.Initialization.Provisioned
}
