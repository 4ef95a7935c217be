package controllers_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/internal/vco/vcotest"
)

// TestOperatorCredentials: the operator credentials do what they are for.
//
//   - spec.geo.imagePublishCredentialSecretRef publishes a location image the cluster's
//     credential cannot see, so the site's machines can use it (LocationImagePublished event);
//     without it the condition says what to do; with the cluster's own credential in its
//     place the platform answers 403, which is OperatorCredentialForbidden.
//   - spec.registry.certificateSecretRef is uploaded to the SSL certificate store with
//     certCredentialSecretRef, replaced when the Secret changes and deleted at teardown;
//     with the cluster's credential the store answers 403, a clear condition.
//     A teardown whose operator credential is gone leaves the certificate and finishes.
//   - no credential value or private key appears in a log line, event or status.
func TestOperatorCredentials(t *testing.T) {
	t.Parallel()
	seed := vcosim.DefaultSeed()
	for _, name := range []string{"hidden-a", "hidden-b", "hidden-c"} {
		// Operator images (no owner), not public yet: the cluster's credential cannot see them.
		seed.Images = append(seed.Images, vcosim.Image{Location: vcosim.SeedLocation2, Name: name, OSType: "Linux", OSName: "Ubuntu 24.04 LTS", BootType: "bios", BootDiskSize: 10, Memory: 512})
	}
	h := newHarness(t, harnessOptions{sim: vcosim.Options{Seed: &seed}})
	g := NewWithT(t)
	ctx := context.Background()
	hidden := map[string]int64{}
	for _, img := range h.sim.Snapshot().Images {
		if strings.HasPrefix(img.Name, "hidden-") {
			hidden[img.Name] = int64(img.ID)
		}
	}
	opToken, err := h.sim.Token(vcosim.SeedOperatorPrinc, 0)
	g.Expect(err).NotTo(HaveOccurred())
	h.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "operator-credentials"},
		Data: map[string][]byte{vco.SecretKeyURL: []byte(h.sim.APIURL()), vco.SecretKeyCustomer: []byte(vcosim.SeedCustomer),
			vco.SecretKeyJWT: []byte(opToken)},
	})
	certPEM, keyPEM := vcotest.SelfSigned(t, "registry.pub.example", "registry.pub.example")
	h.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "registry-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	})
	otherCert, otherKey := vcotest.SelfSigned(t, "registry.forbid.example", "registry.forbid.example")
	h.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "registry-tls-forbid"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: otherCert, corev1.TLSPrivateKeyKey: otherKey},
	})
	geo := func(image int64, publish string) *capvcov1.GeoSpec {
		spec := &capvcov1.GeoSpec{
			Sites:          []capvcov1.GeoSite{{Name: "be", Location: vcosim.SeedLocation2}},
			LocationImages: map[string]int64{vcosim.SeedLocation2: image},
		}
		if publish != "" {
			spec.ImagePublishCredentialSecretRef = &corev1.LocalObjectReference{Name: publish}
		}
		return spec
	}
	pubCluster, pub := h.cluster("pub", func(vc *capvcov1.VCOCluster) {
		vc.Spec.Geo = geo(hidden["hidden-a"], "operator-credentials")
		vc.Spec.Registry = &capvcov1.RegistrySpec{
			CertificateSecretRef:    &corev1.LocalObjectReference{Name: "registry-tls"},
			CertCredentialSecretRef: &corev1.LocalObjectReference{Name: "operator-credentials"},
		}
	})
	forbidCluster, forbid := h.cluster("forbid", func(vc *capvcov1.VCOCluster) {
		vc.Spec.Geo = geo(hidden["hidden-b"], "vco-credentials") // the cluster's own credential
		vc.Spec.Registry = &capvcov1.RegistrySpec{CertificateSecretRef: &corev1.LocalObjectReference{Name: "registry-tls-forbid"}}
	})
	noneCluster, none := h.cluster("none", func(vc *capvcov1.VCOCluster) { vc.Spec.Geo = geo(hidden["hidden-c"], "") })
	// A cluster whose operator credential is gone by teardown: the certificate stays, the
	// teardown does not hang.
	goneCert, goneKey := vcotest.SelfSigned(t, "registry.gone.example", "registry.gone.example")
	h.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "registry-tls-gone"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: goneCert, corev1.TLSPrivateKeyKey: goneKey},
	})
	h.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "operator-gone"},
		Data: map[string][]byte{vco.SecretKeyURL: []byte(h.sim.APIURL()), vco.SecretKeyCustomer: []byte(vcosim.SeedCustomer),
			vco.SecretKeyJWT: []byte(opToken)},
	})
	goneCluster, gone := h.cluster("gone", func(vc *capvcov1.VCOCluster) {
		vc.Spec.Registry = &capvcov1.RegistrySpec{
			CertificateSecretRef:    &corev1.LocalObjectReference{Name: "registry-tls-gone"},
			CertCredentialSecretRef: &corev1.LocalObjectReference{Name: "operator-gone"},
		}
	})

	waitFor(h, pub, time.Minute, "LocationImagesReady and RegistryCertificateReady", func(vc *capvcov1.VCOCluster) bool {
		return conditions.IsTrue(vc, capvcov1.LocationImagesReadyCondition) && conditions.IsTrue(vc, capvcov1.RegistryCertificateReadyCondition)
	})
	g.Expect(conditions.Get(pub, capvcov1.RegistryCertificateReadyCondition).Message).To(ContainSubstring("certificate for registry.pub.example"))
	images := map[string]*vcosim.Image{}
	for _, img := range h.sim.Snapshot().Images {
		images[img.Name] = img
	}
	g.Expect(images["hidden-a"].Public).To(BeTrue(), "published with the operator credential")
	g.Expect(images["hidden-b"].Public).To(BeFalse())
	g.Expect(images["hidden-c"].Public).To(BeFalse())
	stored := func() map[string]*vcosim.Certificate {
		out := map[string]*vcosim.Certificate{}
		for _, c := range h.sim.Snapshot().Certificates {
			out[c.Domain] = c
		}
		return out
	}
	g.Expect(stored()).To(HaveKey("registry.pub.example"))
	g.Expect(stored()["registry.pub.example"].CreatedBy).To(Equal(vcosim.SeedOperatorPrinc))

	waitFor(h, forbid, time.Minute, "OperatorCredentialForbidden twice", func(vc *capvcov1.VCOCluster) bool {
		img := conditions.Get(vc, capvcov1.LocationImagesReadyCondition)
		reg := conditions.Get(vc, capvcov1.RegistryCertificateReadyCondition)
		return img != nil && img.Reason == capvcov1.OperatorCredentialForbiddenReason && reg != nil && reg.Reason == capvcov1.OperatorCredentialForbiddenReason
	})
	g.Expect(conditions.Get(forbid, capvcov1.LocationImagesReadyCondition).Message).To(ContainSubstring("with the credential of Secret vco-credentials (spec.geo.imagePublishCredentialSecretRef) was refused (403)"))
	g.Expect(conditions.Get(forbid, capvcov1.RegistryCertificateReadyCondition).Message).To(ContainSubstring("with the cluster's credential (Secret vco-credentials) for the certificate for registry.forbid.example"))
	g.Expect(conditions.Get(forbid, capvcov1.RegistryCertificateReadyCondition).Message).To(ContainSubstring("set spec.registry.certCredentialSecretRef"))
	g.Expect(stored()).NotTo(HaveKey("registry.forbid.example"))
	waitFor(h, none, time.Minute, "LocationImageNotVisible", func(vc *capvcov1.VCOCluster) bool {
		c := conditions.Get(vc, capvcov1.LocationImagesReadyCondition)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == capvcov1.LocationImageNotVisibleReason &&
			strings.Contains(c.Message, "set spec.geo.imagePublishCredentialSecretRef")
	})
	// Neither stops the cluster: the infrastructure exists.
	waitFor(h, forbid, time.Minute, "provisioned", provisionedCluster)

	// A renewed certificate replaces the stored one.
	renewedCert, renewedKey := vcotest.SelfSigned(t, "registry.pub.example", "registry.pub.example")
	tls := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "registry-tls"}, tls)).To(Succeed())
	tls.Data = map[string][]byte{corev1.TLSCertKey: renewedCert, corev1.TLSPrivateKeyKey: renewedKey}
	g.Expect(env.Client.Update(ctx, tls)).To(Succeed())
	g.Eventually(func() string {
		c := stored()["registry.pub.example"]
		if c == nil {
			return ""
		}
		return c.CRT
	}, time.Minute, 200*time.Millisecond).Should(Equal(string(renewedCert)), "the store holds the renewed certificate")

	waitFor(h, pub, time.Minute, "provisioned", provisionedCluster)
	waitFor(h, gone, time.Minute, "RegistryCertificateReady", func(vc *capvcov1.VCOCluster) bool {
		return conditions.IsTrue(vc, capvcov1.RegistryCertificateReadyCondition)
	})
	g.Expect(env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "operator-gone"}})).To(Succeed())
	for _, c := range []client.Object{pubCluster, forbidCluster, noneCluster, goneCluster} {
		g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
	}
	for _, vc := range []*capvcov1.VCOCluster{pub, forbid, none, gone} {
		h.waitGone(vc, 2*time.Minute)
	}
	g.Expect(stored()).To(HaveLen(1), "teardown deleted the certificate it uploaded, and left the one it had no credential for")
	g.Expect(stored()).To(HaveKey("registry.gone.example"))
	g.Expect(vcotest.Client(t, h.sim, vcosim.SeedOperatorPrinc).DeleteCertificate(ctx, "registry.gone.example")).To(Succeed())
	h.assertNothingLeft(nil)

	var events corev1.EventList
	g.Expect(env.Client.List(ctx, &events, client.InNamespace(h.ns))).To(Succeed())
	var published bool
	for _, e := range events.Items {
		published = published || (e.Reason == capvcov1.LocationImagePublishedEvent && e.InvolvedObject.Name == "pub")
	}
	g.Expect(published).To(BeTrue(), "LocationImagePublished event")
	shown, _ := json.Marshal([]any{events.Items, pub.Status, forbid.Status, none.Status})
	everything := string(shown) + h.logs.String()
	for _, secret := range []string{opToken, h.simToken, string(keyPEM), string(renewedKey), string(otherKey), string(goneKey)} {
		g.Expect(strings.Contains(everything, secret)).To(BeFalse(), "a credential or private key was shown")
	}
}
