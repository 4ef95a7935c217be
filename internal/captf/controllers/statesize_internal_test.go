package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

// TestStateSizeCondition: StateNearSecretLimit warns from 75% of the 1 MiB a state Secret holds.
func TestStateSizeCondition(t *testing.T) {
	for _, tc := range []struct {
		bytes  int64
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		{0, metav1.ConditionFalse, captfv1.StateSizeWithinLimitReason, "The state is 0.00 MiB compressed, 0% of the 1 MiB one state Secret holds"},
		{786431, metav1.ConditionFalse, captfv1.StateSizeWithinLimitReason, "The state is 0.75 MiB compressed, 74% of the 1 MiB one state Secret holds"},
		{786432, metav1.ConditionTrue, captfv1.StateNearSecretLimitReason, "The state is 0.75 MiB compressed, 75% of the 1 MiB one state Secret holds: "},
		{1 << 21, metav1.ConditionTrue, captfv1.StateNearSecretLimitReason, "The state is 2.00 MiB compressed, 200% of the 1 MiB one state Secret holds: "},
	} {
		g := NewWithT(t)
		s, reason, msg := stateSizeCondition(tc.bytes)
		g.Expect(s).To(Equal(tc.status), "%d bytes", tc.bytes)
		g.Expect(reason).To(Equal(tc.reason))
		g.Expect(msg).To(HavePrefix(tc.msg))
	}
}
