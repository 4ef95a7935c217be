package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/imagepublish"
	"github.com/capx-io/capx/internal/capvco/platform"
	"github.com/capx-io/capx/internal/capvco/registrycert"
)

// The operator-privileged actions of a VCOCluster: publishing the location images a site
// needs, and keeping the registry certificate in the SSL certificate store. Each uses its own
// credential Secret from the spec when set. What the last check found is recorded in status
// (status.locationImages, status.registryCertificate): a success makes no call again until its
// inputs change, a failure is tried again operatorRetry after it was checked, and in between
// its condition keeps the message of that check. decide.OperatorCheckDue is the rule.

// operatorRetry is how soon a refused or failed operator action is tried again.
const operatorRetry = decide.OperatorRetry

// imagesObserved is what the location-image check saw.
type imagesObserved struct {
	outcomes []imagepublish.Outcome
	// fresh are the outcomes checked with the platform this pass (the rest came from status).
	fresh []imagepublish.Outcome
	// credential is the Secret that publishes ("" when spec.geo names none).
	credential string
	err        error
	// checked: the platform was asked this pass (else outcomes are status's visible images,
	// and a failure recorded there is not due again yet: the condition stands as it is).
	checked bool
	// retrying: a failure recorded in status is waiting for its retry.
	retrying bool
}

// registryObserved is what the registry-certificate step saw.
type registryObserved struct {
	cert   *registrycert.Certificate
	action registrycert.Action
	// credential is the Secret that writes the store; clusterCredential when it is the cluster's.
	credential        string
	clusterCredential bool
	err               error
	// checked: the store was written or read this pass; retrying: a failure recorded in
	// status is waiting for its retry (the condition stands as it is).
	checked, retrying bool
}

// checkLocationImages checks that every site's location sees its image of
// spec.geo.locationImages, publishing with the operator credential where it does not.
func (r *clusterProvider) checkLocationImages(ctx context.Context, p *clusterPass) error {
	vc := p.vc
	p.obs.missingImages = decide.MissingLocationImages(vc.Spec)
	if vc.Spec.Geo == nil || len(vc.Spec.Geo.LocationImages) == 0 {
		return nil
	}
	obs := &imagesObserved{}
	p.obs.images = obs
	if ref := vc.Spec.Geo.ImagePublishCredentialSecretRef; ref != nil {
		obs.credential = ref.Name
	}
	pending, due := pendingImages(vc, obs, p.obs.now)
	if len(pending) == 0 {
		return nil
	}
	if !due {
		obs.retrying = true
		return nil
	}
	obs.checked = true
	var publisher imagepublish.Publisher
	if obs.credential != "" {
		op, err := platform.ClientFor(ctx, r.client, r.platform, vc.Namespace, obs.credential)
		if err != nil {
			obs.err = err
			return nil
		}
		publisher = op
	}
	outcomes, err := imagepublish.Ensure(ctx, p.api, publisher, vc.Spec.Geo.LocationImages, pending)
	obs.err = err
	for _, o := range outcomes {
		if o.Published {
			r.recorder.Eventf(vc, corev1.EventTypeNormal, capvcov1.LocationImagePublishedEvent,
				"Published image %d in location %s with the credential of Secret %s, so the cluster's credential can use it", o.ID, o.Location, obs.credential)
		}
		obs.outcomes = append(obs.outcomes, o)
		obs.fresh = append(obs.fresh, o)
	}
	return nil
}

// pendingImages are the locations whose image status does not record as visible for the
// current image and publish credential (the visible ones go into obs.outcomes as they are);
// due when one of them is new or its failure's retry is due. All pending ones are checked
// together, so the condition always describes every location.
func pendingImages(vc *capvcov1.VCOCluster, obs *imagesObserved, now time.Time) (pending []string, due bool) {
	for _, loc := range locations(decide.Sites(vc.Spec)) {
		id, ok := vc.Spec.Geo.LocationImages[loc]
		if !ok {
			continue
		}
		rec := locationImageStatus(vc, loc)
		same := rec != nil && rec.ID == id && rec.PublishCredential == obs.credential
		if same && rec.Visible {
			obs.outcomes = append(obs.outcomes, imagepublish.Outcome{Location: loc, ID: id, Visible: true})
			continue
		}
		pending = append(pending, loc)
		due = due || !same || decide.OperatorCheckDue(false, rec.CheckedAt.Time, now)
	}
	return pending, due
}

// keepRegistryCertificate keeps the registry certificate of spec.registry in the platform's SSL
// certificate store.
func (r *clusterProvider) keepRegistryCertificate(ctx context.Context, p *clusterPass) error {
	vc := p.vc
	reg := vc.Spec.Registry
	if reg == nil || reg.CertificateSecretRef == nil {
		return nil
	}
	obs := &registryObserved{}
	p.obs.registry = obs
	obs.credential, obs.clusterCredential = registryCredential(vc)
	cert, err := r.registryCertificate(ctx, vc)
	if err != nil {
		obs.err, obs.checked = err, true
		return nil
	}
	obs.cert = &cert
	if rec := vc.Status.RegistryCertificate; rec != nil && rec.SHA256 == cert.Fingerprint && rec.Credential == obs.credential &&
		!decide.OperatorCheckDue(rec.Stored, rec.CheckedAt.Time, p.obs.now) {
		obs.retrying = !rec.Stored
		return nil
	}
	obs.checked = true
	api, err := platform.ClientFor(ctx, r.client, r.platform, vc.Namespace, obs.credential)
	if err == nil {
		obs.action, err = registrycert.Ensure(ctx, api, cert)
	}
	obs.err = err
	return nil
}

// registryCredential is the Secret that writes the certificate store: certCredentialSecretRef,
// else the cluster's.
func registryCredential(vc *capvcov1.VCOCluster) (name string, cluster bool) {
	if ref := vc.Spec.Registry.CertCredentialSecretRef; ref != nil {
		return ref.Name, false
	}
	return vc.Spec.CredentialsRef.Name, true
}

// errCertificateSecretNotFound: the registry's TLS Secret does not exist.
var errCertificateSecretNotFound = errors.New("certificate Secret not found")

// registryCertificate reads and parses the registry's TLS Secret.
func (r *clusterProvider) registryCertificate(ctx context.Context, vc *capvcov1.VCOCluster) (registrycert.Certificate, error) {
	name := vc.Spec.Registry.CertificateSecretRef.Name
	s := &corev1.Secret{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: vc.Namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return registrycert.Certificate{}, fmt.Errorf("Secret %s/%s (spec.registry.certificateSecretRef): %w", vc.Namespace, name, errCertificateSecretNotFound)
		}
		return registrycert.Certificate{}, fmt.Errorf("read Secret %s/%s: %w", vc.Namespace, name, err)
	}
	cert, err := registrycert.Parse(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return registrycert.Certificate{}, fmt.Errorf("Secret %s/%s (spec.registry.certificateSecretRef): %w", vc.Namespace, name, err)
	}
	return cert, nil
}

// deleteRegistryCertificate is the teardown step: the stored certificate goes when it is still
// this cluster's. A certificate the teardown cannot identify (its Secret is gone), has no
// credential for (its Secret is gone) or may not delete (403) is left in the store and said so
// in the returned note; other errors are retried.
func (r *clusterProvider) deleteRegistryCertificate(ctx context.Context, vc *capvcov1.VCOCluster) (note string, err error) {
	if vc.Spec.Registry == nil || vc.Spec.Registry.CertificateSecretRef == nil {
		return "", nil
	}
	cert, err := r.registryCertificate(ctx, vc)
	if errors.Is(err, errCertificateSecretNotFound) || errors.Is(err, registrycert.ErrInvalid) {
		return "the registry certificate Secret is gone or unreadable, so the stored certificate cannot be identified and is left in the store", nil
	}
	if err != nil {
		return "", err
	}
	credential, _ := registryCredential(vc)
	api, err := platform.ClientFor(ctx, r.client, r.platform, vc.Namespace, credential)
	if errors.Is(err, platform.ErrCredentialsNotFound) {
		return fmt.Sprintf("the %s is left in the store: its credential Secret %s is gone", cert, credential), nil
	}
	if err != nil {
		return "", err
	}
	if _, err := registrycert.Delete(ctx, api, cert); err != nil {
		if isForbidden(err) {
			r.recorder.Eventf(vc, corev1.EventTypeWarning, capvcov1.RegistryCertificateLeftEvent,
				"The %s stays in the platform's SSL certificate store: the credential of Secret %s may not delete it (403); remove it with an operator credential", cert, credential)
			return fmt.Sprintf("the %s is left in the store: the credential of Secret %s may not delete it (403)", cert, credential), nil
		}
		return "", err
	}
	return "", nil
}
