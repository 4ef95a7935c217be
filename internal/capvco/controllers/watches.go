package controllers

import (
	"context"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
)

// machinesToCluster enqueues the VCOCluster of a control-plane VCOMachine's cluster (pool
// membership follows the control-plane machines; workers do not concern the cluster).
func machinesToCluster(c client.Client) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		if _, cp := o.GetLabels()[clusterv1.MachineControlPlaneLabel]; !cp {
			return nil
		}
		var list capvcov1.VCOClusterList
		if !listSameCluster(ctx, c, o, &list) {
			return nil
		}
		return requests(list.Items)
	}
}

// clusterToMachines enqueues the VCOMachines of a VCOCluster's cluster (they wait for it).
func clusterToMachines(c client.Client) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list capvcov1.VCOMachineList
		if !listSameCluster(ctx, c, o, &list) {
			return nil
		}
		return requests(list.Items)
	}
}

// clusterToTemplates enqueues the VCOMachineTemplates that name a Cluster in their
// cluster-name label (its pause transitions concern them).
func clusterToTemplates(c client.Client) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list capvcov1.VCOMachineTemplateList
		if err := c.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the Cluster's VCOMachineTemplates")
			return nil
		}
		return requests(list.Items)
	}
}

// vcoClusterToTemplates maps a VCOCluster to the templates labelled with its Cluster.
func vcoClusterToTemplates(c client.Client) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list capvcov1.VCOMachineTemplateList
		if !listSameCluster(ctx, c, o, &list) {
			return nil
		}
		return requests(list.Items)
	}
}

func listSameCluster(ctx context.Context, c client.Client, o client.Object, list client.ObjectList) bool {
	name := o.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" {
		return false
	}
	if err := c.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing objects of the same cluster")
		return false
	}
	return true
}

// requests turns a list's items into reconcile requests.
func requests[T any, P interface {
	*T
	client.Object
}](items []T) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(items))
	for i := range items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(P(&items[i]))})
	}
	return out
}
