package controllers

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// TestPodRefusalReasons: admission's refusals of a Pod, as the API server words them, and the
// Job controller's FailedCreate events that quote them.
func TestPodRefusalReasons(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	forbidden := func(msg string) error { return apierrors.NewForbidden(pods, "x", errors.New(msg)) }
	tests := []struct {
		err  error
		want string
	}{
		{forbidden(`exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0`), captfv1.PodQuotaExceededReason},
		{forbidden(`failed quota: compute: must specify limits.cpu for: source`), captfv1.PodQuotaExceededReason},
		{forbidden(`status unknown for quota: no-pods, resources: pods`), captfv1.PodQuotaExceededReason},
		{forbidden(`violates PodSecurity "restricted:latest": runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true)`), captfv1.PodSecurityRefusedReason},
		{forbidden(`ValidatingAdmissionPolicy 'p' with binding 'p' denied request: no Pods here`), captfv1.PodsRefusedReason},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "x", nil), captfv1.PodsRefusedReason},
		{apierrors.NewServiceUnavailable("etcd"), ""},
		{errors.New("connection refused"), ""},
	}
	for _, tt := range tests {
		NewWithT(t).Expect(podRefusalReason(tt.err)).To(Equal(tt.want), tt.err.Error())
	}

	g := NewWithT(t)
	g.Expect(refusalReason(`Error creating: pods "captf-m-m1-apply-a1-0123ab-x" is forbidden: exceeded quota: no-pods`)).To(Equal(captfv1.PodQuotaExceededReason))
	g.Expect(refusalReason(`Error creating: pods "p" is forbidden: violates PodSecurity "baseline:latest": host namespaces`)).To(Equal(captfv1.PodSecurityRefusedReason))
	g.Expect(refusalReason(`Error creating: admission webhook "x" denied the request`)).To(Equal(captfv1.PodsRefusedReason))

	// What a start waits on: a refusal of the Pods, a quota's of the Job, nothing else.
	pod := &podRefusal{reason: captfv1.PodSecurityRefusedReason, err: forbidden("violates PodSecurity")}
	g.Expect(startRefusal(fmt.Errorf("start: %w", pod))).To(Equal(captfv1.PodSecurityRefusedReason))
	g.Expect(startRefusal(apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "j",
		errors.New("exceeded quota: no-jobs, requested: count/jobs.batch=1")))).To(Equal(captfv1.QuotaExceededReason))
	g.Expect(startRefusal(forbidden(`User "x" cannot create resource "jobs"`))).To(BeEmpty())
	g.Expect(podRefusalMessage(pod)).To(Equal("Admission refused the Job's Pods, so no Job was started: " + pod.err.Error()))
}
