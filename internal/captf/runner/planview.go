package runner

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	tfjson "github.com/hashicorp/terraform-json"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capx-io/capx/internal/captf/planview"
	"github.com/capx-io/capx/internal/captf/runresult"
	"github.com/capx-io/capx/internal/captf/savedplan"
)

// storePlan stores a plan that will wait for approval where the manager records it from: the
// saved plan (the plan file at planPath and its show -json document, internal/captf/savedplan),
// which an approval lets apply and which the manager hashes, and the readable, redacted changes
// `kubectl captf plan show` reads (internal/captf/planview). Both are named for the TerraformPlan
// (savedplan.PlanName) and owned by the CAPTF object until the manager hands them to that plan. The
// saved plan holds every input value, sensitive ones too: it is written to Secrets only, never
// logged. A saved plan that cannot be stored fails the run, since nobody could approve the
// plan; a view that cannot be is logged, since the approval does not depend on it. Without an
// object to store them for (no --event-object or no API server, as outside a Job) nothing is
// stored.
func (r *run) storePlan(ctx context.Context, plan *tfjson.Plan, planPath string) *failure {
	if !changesResources(r.res.Plan) {
		return nil // nothing anyone approves: the manager records no plan
	}
	if r.events == nil || r.o.jobName == "" {
		r.logf("no object to store the plan for (--event-object, --job-name): it cannot be approved")
		return nil
	}
	ref := r.events.regarding
	name := savedplan.PlanName(ref.Name, r.o.jobName)
	labels := backendLabels(r.o.backendConfig)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()

	fail := func(err error) *failure {
		return &failure{kind: runresult.KindStep, step: "store-plan", summary: r.red.String(fmt.Sprintf(
			"could not store the saved plan for TerraformPlan %s, so it cannot be approved: %v", name, err))}
	}
	file, err := os.ReadFile(planPath)
	if err != nil {
		return fail(err)
	}
	doc, err := savedplan.Document(plan)
	if err != nil {
		return fail(err)
	}
	saved, err := savedplan.Encode(&savedplan.Bundle{PlanFile: file, Plan: doc}, name, ref.Namespace, labels)
	if err != nil {
		return fail(err)
	}
	if err := r.writeSecrets(ctx, saved); err != nil {
		return fail(err)
	}
	r.logf("stored the saved plan for TerraformPlan %s in %d Secret(s)", name, len(saved))

	view, err := planview.Encode(planview.FromPlan(plan, r.red.String), name, ref.Namespace, labels)
	if err == nil {
		err = r.writeSecrets(ctx, view)
	}
	if err != nil {
		r.logf("could not store the plan's readable changes for TerraformPlan %s (kubectl captf plan show will not have them): %v", name, err)
		return nil
	}
	r.logf("stored the plan's readable changes for TerraformPlan %s in %d Secret(s)", name, len(view))
	return nil
}

// writeSecrets creates the Secrets owned by the run's object, or updates those of the same name
// (the same Job ran again, a retried pod: the newer write wins).
func (r *run) writeSecrets(ctx context.Context, secrets []*corev1.Secret) error {
	ref := r.events.regarding
	owner := metav1.OwnerReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID}
	api := r.events.client.CoreV1().Secrets(ref.Namespace)
	for _, s := range secrets {
		s.OwnerReferences = []metav1.OwnerReference{owner}
		_, err := api.Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var old *corev1.Secret
			if old, err = api.Get(ctx, s.Name, metav1.GetOptions{}); err == nil {
				s.ResourceVersion = old.ResourceVersion
				_, err = api.Update(ctx, s, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("Secret %s: %w", s.Name, err)
		}
	}
	return nil
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
