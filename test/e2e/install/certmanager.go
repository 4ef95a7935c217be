package install

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// injectCAAnnotation is how components ask cert-manager's cainjector for a caBundle.
const injectCAAnnotation = "cert-manager.io/inject-ca-from"

// WithoutCertManager does cert-manager's job ahead of time, for components rendered for a cluster
// that runs no cert-manager: for each Certificate it creates (or reuses, from certDir) a CA and a
// serving certificate for the Certificate's DNS names and adds the Secret cert-manager would have
// written; it fills the caBundle of every webhook configuration and CRD conversion webhook that
// asks for that Certificate's CA; and it drops the Issuers and Certificates.
func WithoutCertManager(m Manifest, certDir string) (Manifest, error) {
	certs := map[string]*ServingCert{} // by namespace/name of the Certificate
	var secrets, out Manifest
	for _, o := range m {
		if o.GetKind() != "Certificate" || !strings.HasPrefix(o.GetAPIVersion(), "cert-manager.io/") {
			continue
		}
		ns, name := o.GetNamespace(), o.GetName()
		dnsNames, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "dnsNames")
		secretName, _, _ := unstructured.NestedString(o.Object, "spec", "secretName")
		if secretName == "" || len(dnsNames) == 0 {
			return nil, fmt.Errorf("Certificate %s/%s: no secretName or dnsNames", ns, name)
		}
		c, err := LoadOrCreateServingCert(filepath.Join(certDir, ns+"-"+name), dnsNames)
		if err != nil {
			return nil, err
		}
		certs[ns+"/"+name] = c
		secret := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1",
			"kind":       "Secret",
			"metadata": map[string]any{
				"name":      secretName,
				"namespace": ns,
				"labels":    toAny(o.GetLabels()),
			},
			"type": "kubernetes.io/tls",
			"data": map[string]any{
				caFile:   base64.StdEncoding.EncodeToString(c.CA),
				certFile: base64.StdEncoding.EncodeToString(c.Cert),
				keyFile:  base64.StdEncoding.EncodeToString(c.Key),
			},
		}}
		secrets = append(secrets, secret)
	}
	for _, o := range m.Without("Issuer", "Certificate") {
		from, ok := o.GetAnnotations()[injectCAAnnotation]
		if !ok {
			out = append(out, o)
			continue
		}
		c := certs[from]
		if c == nil {
			return nil, fmt.Errorf("%s %s asks for the CA of Certificate %s, which the components do not hold", o.GetKind(), o.GetName(), from)
		}
		if err := setCABundle(o, base64.StdEncoding.EncodeToString(c.CA)); err != nil {
			return nil, err
		}
		ann := o.GetAnnotations()
		delete(ann, injectCAAnnotation)
		o.SetAnnotations(ann)
		out = append(out, o)
	}
	// After everything else: the Namespace comes first in the components.
	return append(out, secrets...), nil
}

func setCABundle(o *unstructured.Unstructured, ca string) error {
	switch o.GetKind() {
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			if err := unstructured.SetNestedField(h.(map[string]any), ca, "clientConfig", "caBundle"); err != nil {
				return err
			}
		}
		return unstructured.SetNestedSlice(o.Object, hooks, "webhooks")
	case "CustomResourceDefinition":
		if s, _, _ := unstructured.NestedString(o.Object, "spec", "conversion", "strategy"); s != "Webhook" {
			return nil
		}
		return unstructured.SetNestedField(o.Object, ca, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	}
	return fmt.Errorf("%s %s: no caBundle to inject", o.GetKind(), o.GetName())
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
