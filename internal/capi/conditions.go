package capi

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReadyCondition summarises an object; CAPI mirrors an infrastructure object's Ready condition
// into its owner's InfrastructureReady.
const ReadyCondition = clusterv1.ReadyCondition

// Reasons of the Ready summary.
const (
	ReadyReason        = "Ready"
	NotReadyReason     = "NotReady"
	ReadyUnknownReason = "ReadyUnknown"
)

// SetReady summarises the given condition types (those of negative polarity listed again in
// negative) into Ready. Missing conditions are ignored, so a provider sets only what it observed.
func SetReady(obj Object, types, negative []string) {
	_ = conditions.SetSummaryCondition(obj, obj, ReadyCondition,
		conditions.ForConditionTypes(types),
		conditions.NegativePolarityConditionTypes(negative),
		conditions.IgnoreTypesIfMissing(types),
		conditions.CustomMergeStrategy{MergeStrategy: conditions.DefaultMergeStrategy(
			conditions.GetPriorityFunc(conditions.GetDefaultMergePriorityFunc(negative...)),
			conditions.ComputeReasonFunc(conditions.GetDefaultComputeMergeReasonFunc(NotReadyReason, ReadyUnknownReason, ReadyReason)),
		)},
	)
}

// isPaused reports whether the object must not be changed, and why.
func isPaused(cluster *clusterv1.Cluster, obj client.Object) (bool, string) {
	var why []string
	if cluster != nil && ptr.Deref(cluster.Spec.Paused, false) {
		why = append(why, "Cluster spec.paused is true")
	}
	if annotations.HasPaused(obj) {
		why = append(why, "the object has the "+clusterv1.PausedAnnotation+" annotation")
	}
	return len(why) > 0, strings.Join(why, "; ")
}

// pausedCondition is the Paused condition for a reason ("" when not paused).
func pausedCondition(obj client.Object, why string) metav1.Condition {
	if why == "" {
		return metav1.Condition{
			Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse,
			Reason: clusterv1.NotPausedReason, ObservedGeneration: obj.GetGeneration(),
		}
	}
	return metav1.Condition{
		Type: clusterv1.PausedCondition, Status: metav1.ConditionTrue,
		Reason: clusterv1.PausedReason, Message: why, ObservedGeneration: obj.GetGeneration(),
	}
}

// deletingCondition is Deleting=True with an optional message saying what the deletion waits for.
func deletingCondition(obj client.Object, message string) metav1.Condition {
	return metav1.Condition{
		Type: clusterv1.DeletingCondition, Status: metav1.ConditionTrue,
		Reason: clusterv1.DeletingReason, Message: message, ObservedGeneration: obj.GetGeneration(),
	}
}

func notDeletingCondition(obj client.Object) metav1.Condition {
	return metav1.Condition{
		Type: clusterv1.DeletingCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.NotDeletingReason, ObservedGeneration: obj.GetGeneration(),
	}
}
