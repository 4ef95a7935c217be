package controllers

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestIsQuotaError: the quota admission plugin's refusals, as the API server words them.
func TestIsQuotaError(t *testing.T) {
	jobs := schema.GroupResource{Group: "batch", Resource: "jobs"}
	for msg, want := range map[string]bool{
		"exceeded quota: no-jobs, requested: count/jobs.batch=1, used: count/jobs.batch=0, limited: count/jobs.batch=0": true,
		"status unknown for quota: no-jobs, resources: count/jobs.batch":                                                true,
		"failed quota: compute: must specify limits.memory for: source":                                                 true,
		"jobs.batch is forbidden: User \"x\" cannot create resource \"jobs\"":                                           false,
	} {
		err := apierrors.NewForbidden(jobs, "captf-m-m1-apply-a1-abcdef", errors.New(msg))
		NewWithT(t).Expect(isQuotaError(err)).To(Equal(want), msg)
	}
	NewWithT(t).Expect(isQuotaError(errors.New("exceeded quota"))).To(BeFalse(), "not an API error")
}
