package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
// credential Secret from the spec when set; what succeeded is remembered (per process), so a
// steady cluster makes no call for them, and what failed is tried again after operatorRetry.

// operatorRetry is how soon a refused or failed operator action is tried again.
const operatorRetry = time.Minute

// imagesObserved is what the location-image check saw.
type imagesObserved struct {
	outcomes []imagepublish.Outcome
	// credential is the Secret that publishes ("" when spec.geo names none).
	credential string
	err        error
}

// registryObserved is what the registry-certificate step saw.
type registryObserved struct {
	cert   *registrycert.Certificate
	action registrycert.Action
	// credential is the Secret that writes the store; clusterCredential when it is the cluster's.
	credential        string
	clusterCredential bool
	err               error
}

// memo remembers operator outcomes: successes for good, failures for operatorRetry.
type memo struct{ m sync.Map }

type memoEntry struct {
	at  time.Time
	val any
	ok  bool
}

func (m *memo) get(key string) (any, bool) {
	v, found := m.m.Load(key)
	if !found {
		return nil, false
	}
	e := v.(memoEntry)
	if !e.ok && time.Since(e.at) > operatorRetry {
		return nil, false
	}
	return e.val, true
}

func (m *memo) put(key string, val any, ok bool) {
	m.m.Store(key, memoEntry{at: time.Now(), val: val, ok: ok})
}

// forget drops every entry of a VCOCluster (its keys start with its UID).
func (m *memo) forget(uid string) {
	m.m.Range(func(k, _ any) bool {
		if s := k.(string); len(s) > len(uid) && s[:len(uid)+1] == uid+"/" {
			m.m.Delete(k)
		}
		return true
	})
}

// reconcileLocationImages checks that every site's location sees its image of
// spec.geo.locationImages, publishing with the operator credential where it does not.
func (p *clusterProvider) reconcileLocationImages(ctx context.Context, vc *capvcov1.VCOCluster, api platform.Client) *imagesObserved {
	if vc.Spec.Geo == nil || len(vc.Spec.Geo.LocationImages) == 0 {
		return nil
	}
	obs := &imagesObserved{}
	if ref := vc.Spec.Geo.ImagePublishCredentialSecretRef; ref != nil {
		obs.credential = ref.Name
	}
	var pending []string
	for _, loc := range locations(decide.Sites(vc.Spec)) {
		id, ok := vc.Spec.Geo.LocationImages[loc]
		if !ok {
			continue
		}
		key := fmt.Sprintf("%s/image/%s/%d/%s", vc.UID, loc, id, obs.credential)
		if v, ok := p.operator.get(key); ok {
			obs.outcomes = append(obs.outcomes, v.(imagepublish.Outcome))
			continue
		}
		pending = append(pending, loc)
	}
	if len(pending) == 0 {
		return obs
	}
	var publisher imagepublish.Publisher
	if obs.credential != "" {
		op, err := platform.ClientFor(ctx, p.client, p.platform, vc.Namespace, obs.credential)
		if err != nil {
			obs.err = err
			return obs
		}
		publisher = op
	}
	outcomes, err := imagepublish.Ensure(ctx, api, publisher, vc.Spec.Geo.LocationImages, pending)
	obs.err = err
	for _, o := range outcomes {
		p.operator.put(fmt.Sprintf("%s/image/%s/%d/%s", vc.UID, o.Location, o.ID, obs.credential), o, o.Visible)
		if o.Published {
			p.recorder.Eventf(vc, corev1.EventTypeNormal, capvcov1.LocationImagePublishedEvent,
				"Published image %d in location %s with the credential of Secret %s, so the cluster's credential can use it", o.ID, o.Location, obs.credential)
		}
		obs.outcomes = append(obs.outcomes, o)
	}
	return obs
}

// reconcileRegistryCertificate keeps the registry certificate of spec.registry in the
// platform's SSL certificate store.
func (p *clusterProvider) reconcileRegistryCertificate(ctx context.Context, vc *capvcov1.VCOCluster) *registryObserved {
	reg := vc.Spec.Registry
	if reg == nil || reg.CertificateSecretRef == nil {
		return nil
	}
	obs := &registryObserved{}
	obs.credential, obs.clusterCredential = registryCredential(vc)
	cert, rv, err := p.registryCertificate(ctx, vc)
	if err != nil {
		obs.err = err
		return obs
	}
	obs.cert = &cert
	key := fmt.Sprintf("%s/registry/%s/%s", vc.UID, rv, obs.credential)
	if v, ok := p.operator.get(key); ok {
		return v.(*registryObserved)
	}
	api, err := platform.ClientFor(ctx, p.client, p.platform, vc.Namespace, obs.credential)
	if err == nil {
		obs.action, err = registrycert.Ensure(ctx, api, cert)
	}
	obs.err = err
	p.operator.put(key, obs, err == nil)
	return obs
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

// registryCertificate reads and parses the registry's TLS Secret; rv is its resourceVersion.
func (p *clusterProvider) registryCertificate(ctx context.Context, vc *capvcov1.VCOCluster) (registrycert.Certificate, string, error) {
	name := vc.Spec.Registry.CertificateSecretRef.Name
	s := &corev1.Secret{}
	if err := p.client.Get(ctx, client.ObjectKey{Namespace: vc.Namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return registrycert.Certificate{}, "", fmt.Errorf("Secret %s/%s (spec.registry.certificateSecretRef): %w", vc.Namespace, name, errCertificateSecretNotFound)
		}
		return registrycert.Certificate{}, "", fmt.Errorf("read Secret %s/%s: %w", vc.Namespace, name, err)
	}
	cert, err := registrycert.Parse(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return registrycert.Certificate{}, "", fmt.Errorf("Secret %s/%s (spec.registry.certificateSecretRef): %w", vc.Namespace, name, err)
	}
	return cert, s.ResourceVersion, nil
}

// deleteRegistryCertificate is the teardown step: the stored certificate goes when it is still
// this cluster's. A certificate the teardown cannot identify (its Secret is gone), has no
// credential for (its Secret is gone) or may not delete (403) is left in the store and said so
// in the returned note; other errors are retried.
func (p *clusterProvider) deleteRegistryCertificate(ctx context.Context, vc *capvcov1.VCOCluster) (note string, err error) {
	if vc.Spec.Registry == nil || vc.Spec.Registry.CertificateSecretRef == nil {
		return "", nil
	}
	cert, _, err := p.registryCertificate(ctx, vc)
	if errors.Is(err, errCertificateSecretNotFound) || errors.Is(err, registrycert.ErrInvalid) {
		return "the registry certificate Secret is gone or unreadable, so the stored certificate cannot be identified and is left in the store", nil
	}
	if err != nil {
		return "", err
	}
	credential, _ := registryCredential(vc)
	api, err := platform.ClientFor(ctx, p.client, p.platform, vc.Namespace, credential)
	if errors.Is(err, platform.ErrCredentialsNotFound) {
		return fmt.Sprintf("the %s is left in the store: its credential Secret %s is gone", cert, credential), nil
	}
	if err != nil {
		return "", err
	}
	if _, err := registrycert.Delete(ctx, api, cert); err != nil {
		if isForbidden(err) {
			p.recorder.Eventf(vc, corev1.EventTypeWarning, capvcov1.RegistryCertificateLeftEvent,
				"The %s stays in the platform's SSL certificate store: the credential of Secret %s may not delete it (403); remove it with an operator credential", cert, credential)
			return fmt.Sprintf("the %s is left in the store: the credential of Secret %s may not delete it (403)", cert, credential), nil
		}
		return "", err
	}
	return "", nil
}
