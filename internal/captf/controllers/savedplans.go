package controllers

import (
	"context"
	"errors"
	"fmt"

	tfjson "github.com/hashicorp/terraform-json"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/planhash"
	"github.com/capx-io/capx/internal/captf/savedplan"
)

// errNoSavedPlan is a saved plan that is missing or not a complete one: nothing an approval
// could let apply. It is not retried: the Job that stored it is gone.
var errNoSavedPlan = errors.New("no usable saved plan")

// savedPlan is a plan as the manager hashed it from the Secrets its Job stored.
type savedPlan struct {
	hash    string
	plan    *tfjson.Plan
	secrets []string // chunk Secrets in order
	digest  string   // hex SHA-256 of their data, as read
}

// readSavedPlan reads and hashes TerraformPlan name's saved plan, with the digest of the view
// approvers read, which view returns for the parsed plan (recordPlan publishes the view then;
// an approved apply passes the digest the plan recorded). It reads live (a Job's Secrets may not
// be in the cache yet, and need not be: they are read once per plan and per approved apply). A
// missing or corrupt saved plan is errNoSavedPlan.
func (r *provider[T]) readSavedPlan(ctx context.Context, p *pass[T], name, inputsHash string, view func(*tfjson.Plan) (string, error)) (*savedPlan, error) {
	get := func(secret string) (*corev1.Secret, error) {
		s := &corev1.Secret{}
		err := r.reader.Get(ctx, client.ObjectKey{Namespace: p.owner.Namespace, Name: secret}, s)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: Secret %s is missing", errNoSavedPlan, secret)
		}
		return s, err
	}
	first, err := get(savedplan.SecretName(name))
	if err != nil {
		return nil, err
	}
	n, err := savedplan.Chunks(first)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoSavedPlan, err)
	}
	secrets := []*corev1.Secret{first}
	names := []string{first.Name}
	for i := 1; i < n; i++ {
		s, err := get(savedplan.ChunkName(name, i))
		if err != nil {
			return nil, err
		}
		secrets, names = append(secrets, s), append(names, s.Name)
	}
	key, err := r.ensurePlanKey(ctx, p)
	if err != nil {
		return nil, err
	}
	// Decoding and hashing take memory in proportion to the plan: they share the bound on
	// state decodes running at once across the manager.
	select {
	case r.states.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-r.states.sem }()
	b, digest, err := savedplan.Decode(name, secrets)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoSavedPlan, err)
	}
	plan, err := b.ParsePlan()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoSavedPlan, err)
	}
	viewDigest, err := view(plan)
	if err != nil {
		return nil, err
	}
	h, err := b.Hash(key, plan, inputsHash, viewDigest)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoSavedPlan, err)
	}
	return &savedPlan{hash: h, plan: plan, secrets: names, digest: digest}, nil
}

// approvedSavedPlan is what an approved apply of TerraformPlan name (approved as hash) applies:
// its saved plan, when that still hashes, with the object's key, to the approved hash. Otherwise
// (no saved plan, another one, a plan recorded by a manager that kept none) the apply is given
// none: it applies nothing and reports the plan it makes for an approval of its own, and a
// Warning says why. An approved plan that changed no resource (planhash.Empty) has no saved
// plan to give.
func (r *provider[T]) approvedSavedPlan(ctx context.Context, p *pass[T], name, hash string) (*jobs.SavedPlan, error) {
	if hash == planhash.Empty || name == "" {
		return nil, nil
	}
	tp := p.pendingPlan
	if tp == nil || tp.Name != name {
		tp = &captfv1.TerraformPlan{}
		if err := r.client.Get(ctx, client.ObjectKey{Namespace: p.owner.Namespace, Name: name}, tp); err != nil {
			return nil, err
		}
	}
	sp, err := r.readSavedPlan(ctx, p, name, tp.Spec.InputsHash, func(*tfjson.Plan) (string, error) { return tp.Spec.ViewDigest, nil })
	switch {
	case errors.Is(err, errNoSavedPlan):
	case err != nil:
		return nil, err
	case sp.hash == hash:
		return &jobs.SavedPlan{Chunks: sp.secrets, Digest: sp.digest}, nil
	default:
		err = fmt.Errorf("it hashes to %s now", sp.hash)
	}
	r.recorder.Eventf(p.scope.Object, corev1.EventTypeWarning, "SavedPlanRejected",
		"The saved plan of approved TerraformPlan %s cannot be applied (%v); the apply applies nothing and its new plan waits for approval", name, err)
	return nil, nil
}
