package runner

import (
	"context"
	"strings"
	"time"

	tfjson "github.com/hashicorp/terraform-json"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capx-io/capx/internal/captf/planview"
)

// storePlanView writes the readable, redacted changes of a plan that will wait for approval
// into the Secrets `kubectl captf plan show` reads (internal/captf/planview), named for the
// TerraformPlan the manager records from this Job's result and owned by the CAPTF object until
// the manager hands them to that plan. It is best effort: a view that cannot be written is
// logged and never fails the run, because the approval does not depend on it.
func (r *run) storePlanView(ctx context.Context, plan *tfjson.Plan) {
	if r.events == nil || r.res.PlanHash == "" || r.o.jobName == "" {
		return
	}
	ref := r.events.regarding
	name := planview.PlanName(ref.Name, r.o.jobName, r.res.PlanHash)
	secrets, err := planview.Encode(planview.FromPlan(plan, r.red.String), name, ref.Namespace, backendLabels(r.o.backendConfig))
	if err != nil {
		r.logf("could not encode the plan's readable changes (kubectl captf plan show will not have them): %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	owner := metav1.OwnerReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID}
	api := r.events.client.CoreV1().Secrets(ref.Namespace)
	for _, s := range secrets {
		s.OwnerReferences = []metav1.OwnerReference{owner}
		_, err := api.Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// The same Job ran again (a retried pod): the newer write wins.
			var old *corev1.Secret
			if old, err = api.Get(ctx, s.Name, metav1.GetOptions{}); err == nil {
				s.ResourceVersion = old.ResourceVersion
				_, err = api.Update(ctx, s, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			r.logf("could not store the plan's readable changes in Secret %s (kubectl captf plan show will not have them): %v", s.Name, err)
			return
		}
	}
	r.logf("stored the plan's readable changes for TerraformPlan %s in %d Secret(s)", name, len(secrets))
}

// backendLabels reads the labels the manager gave the state backend
// (--backend-config=labels={"k"="v",...}): the owner's labels and clusterctl's move label, which
// the plan view carries too.
func backendLabels(config []string) map[string]string {
	labels := map[string]string{}
	for _, c := range config {
		v, ok := strings.CutPrefix(c, "labels=")
		if !ok {
			continue
		}
		v = strings.TrimSuffix(strings.TrimPrefix(v, "{"), "}")
		for _, kv := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			labels[strings.Trim(k, `"`)] = strings.Trim(val, `"`)
		}
	}
	return labels
}
