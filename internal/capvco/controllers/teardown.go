package controllers

import (
	"context"
	"fmt"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/cloudspace"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/geo"
	"github.com/capx-io/capx/internal/capvco/gpu"
	"github.com/capx-io/capx/internal/capvco/gpuname"
	"github.com/capx-io/capx/internal/capvco/loadbalancer"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/capvco/vm"
)

// teardownStep is one named stage of a VCOCluster's deletion. run returns done=false to wait
// (the pass's requeue says when to look again); an error is retried.
type teardownStep struct {
	name string
	run  func(r *clusterProvider, ctx context.Context, t *teardownPass) (done bool, err error)
}

// teardownSteps is the whole deletion, in order; the Deleting condition names the step it is
// on ("step 3/8: ..."). Every step is idempotent and finds things by name, so the teardown
// resumes after any failure, restart or status loss.
var teardownSteps = []teardownStep{
	{"waiting for the cluster's VCOMachines to be deleted", (*clusterProvider).awaitMachinesGone},
	{"deleting the VMs left in the cloudspaces", (*clusterProvider).deleteVMs},
	{"releasing the cluster's vGPU reservations", (*clusterProvider).releaseGPUs},
	{"deleting the control-plane load balancer and server pool", (*clusterProvider).deleteLoadBalancer},
	{"deleting the DNS record", (*clusterProvider).deleteDNS},
	{"deleting the registry certificate from the SSL certificate store", (*clusterProvider).deleteRegistryCertificateStep},
	{"deleting the connected-cloudspace links", (*clusterProvider).deleteLinks},
	{"deleting the cloudspaces", (*clusterProvider).deleteCloudspaces},
}

// teardownPass is one reconcile of a deleting VCOCluster.
type teardownPass struct {
	*clusterPass
	sites []decide.Site
	// ids are the sites' cloudspaces, from status or found by name ("" for none), once
	// locate ran.
	ids []string
}

// teardownProgress is where the deletion stands, for the Deleting condition.
type teardownProgress struct {
	step   int // index in teardownSteps
	detail string
	err    error
	// tolerated are link deletes that kept failing; the cloudspace delete removes them.
	tolerated []string
	// left says what teardown had to leave behind and why ("" when nothing).
	left string
}

func (t teardownProgress) message() string {
	msg := fmt.Sprintf("step %d/%d: %s", t.step+1, len(teardownSteps), teardownSteps[t.step].name)
	if t.detail != "" {
		msg += " (" + t.detail + ")"
	}
	if len(t.tolerated) > 0 {
		msg += fmt.Sprintf("; link deletes tolerated after %d failed attempts each: %s", geo.DeleteAttempts, strings.Join(t.tolerated, ", "))
	}
	if t.left != "" {
		msg += "; " + t.left
	}
	if t.err != nil {
		msg += ": " + t.err.Error()
	}
	return msg
}

// ReconcileDelete runs the teardown steps in order, everything permanently; done once the last
// one is.
func (r *clusterProvider) ReconcileDelete(ctx context.Context, s *clusterScope) (bool, ctrl.Result, error) {
	t := &teardownPass{clusterPass: r.newPass(s, true), sites: decide.Sites(s.Object.Spec)}
	prog := &t.obs.teardown
	for i, step := range teardownSteps {
		prog.step = i
		done, err := step.run(r, ctx, t)
		if err != nil {
			prog.err = err
			return false, ctrl.Result{}, err
		}
		if !done {
			return false, t.result(), nil
		}
	}
	return true, ctrl.Result{}, nil
}

// locate connects and finds the sites' cloudspaces (status, else by name), once per pass; the
// steps after deleteVMs, which calls it first, use what it found.
func (r *clusterProvider) locate(ctx context.Context, t *teardownPass) error {
	if t.ids != nil {
		return nil
	}
	if err := r.connect(ctx, t.clusterPass); err != nil {
		return err
	}
	ids := make([]string, len(t.sites))
	for i, site := range t.sites {
		ids[i] = cloudspaceStatus(t.vc, site.Name).ID
		if ids[i] != "" {
			continue
		}
		cs, err := t.api.FindCloudspace(ctx, site.Location, names.Cloudspace(t.vc.Namespace, t.cluster, site.Name))
		switch {
		case err == nil:
			ids[i] = cs.ID
		case !isNotFound(err):
			return err
		}
	}
	t.ids = ids
	return nil
}

// awaitMachinesGone waits for the cluster's VCOMachines: their deletion brings the cluster back.
func (r *clusterProvider) awaitMachinesGone(ctx context.Context, t *teardownPass) (bool, error) {
	var machines capvcov1.VCOMachineList
	if err := r.client.List(ctx, &machines, client.InNamespace(t.vc.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: t.cluster}); err != nil {
		return false, err
	}
	if n := len(machines.Items); n > 0 {
		t.obs.teardown.detail = fmt.Sprintf("%d left", n)
		return false, nil
	}
	return true, nil
}

// deleteVMs deletes, permanently, every VM left in the cloudspaces (the recycle bin too).
func (r *clusterProvider) deleteVMs(ctx context.Context, t *teardownPass) (bool, error) {
	if err := r.locate(ctx, t); err != nil {
		return false, err
	}
	for i, id := range t.ids {
		if id == "" {
			continue
		}
		vms, err := t.api.ListVMs(ctx, id, true)
		if isNotFound(err) {
			t.ids[i] = ""
			continue
		}
		if err != nil {
			return false, err
		}
		for _, v := range vms {
			if _, err := vm.Delete(ctx, t.api, id, v.ID, v.Name); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// releaseGPUs releases every reservation named for the cluster, in each of its locations.
func (r *clusterProvider) releaseGPUs(ctx context.Context, t *teardownPass) (bool, error) {
	owned := func(name string) bool { return gpuname.OwnedByCluster(name, t.vc.Namespace, t.cluster) }
	for _, loc := range locations(t.sites) {
		if _, err := gpu.Release(ctx, t.api, loc, owned); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (r *clusterProvider) deleteLoadBalancer(ctx context.Context, t *teardownPass) (bool, error) {
	if t.ids[0] == "" {
		return true, nil
	}
	_, err := loadbalancer.Delete(ctx, t.api, t.ids[0], names.APIServer(t.vc.Namespace, t.cluster))
	return err == nil, err
}

// deleteDNS deletes the A record in the background and waits until it is gone.
func (r *clusterProvider) deleteDNS(ctx context.Context, t *teardownPass) (bool, error) {
	if t.vc.Spec.DNS == nil || t.ids[0] == "" {
		return true, nil
	}
	prog, err := r.dns.Delete(ctx, t.api, t.ids[0], t.vc.Spec.DNS.Name, r.notify(t.vc))
	if err != nil {
		return false, err
	}
	t.obs.teardown.err = prog.Err
	if !prog.Done {
		t.obs.teardown.detail = fmt.Sprintf("%s, a platform DNS write takes about 30 s", t.vc.Spec.DNS.Name)
		t.requeueAfter(waitPoll)
		return false, nil
	}
	return true, nil
}

func (r *clusterProvider) deleteRegistryCertificateStep(ctx context.Context, t *teardownPass) (bool, error) {
	note, err := r.deleteRegistryCertificate(ctx, t.vc)
	t.obs.teardown.left = note
	return err == nil, err
}

// deleteLinks removes the links between the sites; deletes that keep failing are tolerated.
func (r *clusterProvider) deleteLinks(ctx context.Context, t *teardownPass) (bool, error) {
	if len(t.sites) < 2 {
		return true, nil
	}
	var members []geo.Member
	for i, id := range t.ids {
		if id != "" {
			members = append(members, geo.Member{Site: t.sites[i].Name, CloudspaceID: id})
		}
	}
	tolerated, err := geo.Delete(ctx, t.api, members)
	t.obs.teardown.tolerated = tolerated
	return err == nil, err
}

func (r *clusterProvider) deleteCloudspaces(ctx context.Context, t *teardownPass) (bool, error) {
	for i, site := range t.sites {
		if _, err := cloudspace.Delete(ctx, t.api, t.ids[i], site.Location, names.Cloudspace(t.vc.Namespace, t.cluster, site.Name)); err != nil {
			return false, err
		}
	}
	return true, nil
}
