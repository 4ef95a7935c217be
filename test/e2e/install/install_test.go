package install

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capx-io/capx/test/images"
)

func TestSubstituteDefaults(t *testing.T) {
	cases := []struct {
		name, in, want string
		vars           map[string]string
		wantErr        string
	}{
		{name: "defaults", in: "- --gates=MP=${EXP_MACHINE_POOL:=true},CT=${CLUSTER_TOPOLOGY:=false}", want: "- --gates=MP=true,CT=false"},
		{name: "empty default", in: "x: '${A:=}'", want: "x: ''"},
		{name: "value wins", in: "${EXP_MACHINE_POOL:=true}", vars: map[string]string{"EXP_MACHINE_POOL": "false"}, want: "false"},
		{name: "value without default", in: "${NAME}", vars: map[string]string{"NAME": "n"}, want: "n"},
		{name: "missing", in: "${NAME} ${OTHER:=o} ${THIRD}", wantErr: "NAME, THIRD"},
		{name: "no variables", in: "image: capx.local/x:1 # $HOME", want: "image: capx.local/x:1 # $HOME"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := SubstituteDefaults([]byte(tc.in), tc.vars)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).To(Equal(tc.want))
		})
	}
}

// componentsWithCertManager is the shape of Cluster API's rendered core components.
const componentsWithCertManager = `apiVersion: v1
kind: Namespace
metadata:
  name: capi-system
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusters.cluster.x-k8s.io
  annotations:
    cert-manager.io/inject-ca-from: capi-system/capi-serving-cert
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service: {name: capi-webhook-service, namespace: capi-system, path: /convert}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: plain.example.com
spec:
  conversion:
    strategy: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: capi-validating-webhook-configuration
  annotations:
    cert-manager.io/inject-ca-from: capi-system/capi-serving-cert
webhooks:
- name: a.cluster.x-k8s.io
  clientConfig:
    service: {name: capi-webhook-service, namespace: capi-system, path: /a}
- name: b.cluster.x-k8s.io
  clientConfig:
    service: {name: capi-webhook-service, namespace: capi-system, path: /b}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: capi-serving-cert
  namespace: capi-system
  labels:
    cluster.x-k8s.io/provider: cluster-api
spec:
  dnsNames:
  - capi-webhook-service.capi-system.svc
  - capi-webhook-service.capi-system.svc.cluster.local
  issuerRef: {kind: Issuer, name: capi-selfsigned-issuer}
  secretName: capi-webhook-service-cert
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: capi-selfsigned-issuer
  namespace: capi-system
spec:
  selfSigned: {}
`

func TestWithoutCertManager(t *testing.T) {
	g := NewWithT(t)
	m, err := ParseManifest([]byte(componentsWithCertManager))
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	out, err := WithoutCertManager(m, dir)
	g.Expect(err).NotTo(HaveOccurred())

	var kinds []string
	for _, o := range out {
		kinds = append(kinds, o.GetKind())
		g.Expect(o.GetAnnotations()).NotTo(HaveKey(injectCAAnnotation), "%s %s", o.GetKind(), o.GetName())
	}
	g.Expect(kinds).To(Equal([]string{"Namespace", "CustomResourceDefinition", "CustomResourceDefinition", "ValidatingWebhookConfiguration", "Secret"}),
		"Issuer and Certificate dropped, the Secret last (after its Namespace)")

	secret := out[4]
	g.Expect(secret.GetNamespace()).To(Equal("capi-system"))
	g.Expect(secret.GetName()).To(Equal("capi-webhook-service-cert"))
	g.Expect(secret.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/provider", "cluster-api"))
	data := func(key string) []byte {
		v, _, _ := unstructured.NestedString(secret.Object, "data", key)
		b, err := base64.StdEncoding.DecodeString(v)
		g.Expect(err).NotTo(HaveOccurred())
		return b
	}
	ca := data("ca.crt")

	// The injected bundle is the CA, and it verifies the serving certificate for both names.
	crdCA, _, _ := unstructured.NestedString(out[1].Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	g.Expect(crdCA).To(Equal(base64.StdEncoding.EncodeToString(ca)))
	_, found, _ := unstructured.NestedString(out[2].Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	g.Expect(found).To(BeFalse(), "a CRD without a conversion webhook is left alone")
	hooks, _, _ := unstructured.NestedSlice(out[3].Object, "webhooks")
	for _, h := range hooks {
		b, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle")
		g.Expect(b).To(Equal(crdCA))
	}
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(ca)).To(BeTrue())
	block, _ := pem.Decode(data("tls.crt"))
	cert, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"capi-webhook-service.capi-system.svc", "capi-webhook-service.capi-system.svc.cluster.local"} {
		_, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: pool})
		g.Expect(err).NotTo(HaveOccurred(), name)
	}
	g.Expect(data("tls.key")).To(ContainSubstring("PRIVATE KEY"))

	// A second render reuses the certificate kept in the folder.
	again, err := WithoutCertManager(mustParse(t, componentsWithCertManager), dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again[4].Object["data"]).To(Equal(secret.Object["data"]))
}

func TestWithoutCertManagerRefusesAnUnknownCertificate(t *testing.T) {
	m := mustParse(t, `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: x
  annotations:
    cert-manager.io/inject-ca-from: ns/missing
webhooks: []
`)
	_, err := WithoutCertManager(m, t.TempDir())
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("ns/missing")))
}

func TestLocalizeManager(t *testing.T) {
	g := NewWithT(t)
	m := mustParse(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: capi-controller-manager, namespace: capi-system}
spec:
  template:
    spec:
      containers:
      - name: manager
        image: gcr.io/k8s-staging-cluster-api/cluster-api-controller:main
        imagePullPolicy: Always
        livenessProbe: {httpGet: {path: /healthz, port: healthz}}
        readinessProbe: {httpGet: {path: /readyz, port: healthz}}
`)
	g.Expect(localizeManager(m, "capx.local/cluster-api-controller:0123456789ab")).To(Succeed())
	c, _, _ := unstructured.NestedSlice(m[0].Object, "spec", "template", "spec", "containers")
	container := c[0].(map[string]any)
	g.Expect(container["image"]).To(Equal("capx.local/cluster-api-controller:0123456789ab"))
	g.Expect(container["imagePullPolicy"]).To(Equal("IfNotPresent"))
	g.Expect(container["livenessProbe"]).To(HaveKeyWithValue("timeoutSeconds", int64(5)))
	g.Expect(container["livenessProbe"]).To(HaveKeyWithValue("failureThreshold", int64(6)))
	cpu, _, _ := unstructured.NestedString(container, "resources", "requests", "cpu")
	g.Expect(cpu).To(Equal("500m"), "a BestEffort manager is starved by the Jobs")
	g.Expect(localizeManager(mustParse(t, "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"), "x")).NotTo(Succeed())
}

func TestLatestRelease(t *testing.T) {
	g := NewWithT(t)
	v, err := latestRelease([]byte(`apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Metadata
releaseSeries:
- {major: 0, minor: 1, contract: v1beta2}
- {major: 1, minor: 0, contract: v1beta2}
- {major: 0, minor: 9, contract: v1beta2}
`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal("v1.0.0"))
	_, err = latestRelease([]byte("kind: Metadata\n"))
	g.Expect(err).To(HaveOccurred())
}

func TestWithLocalImages(t *testing.T) {
	imgs := &images.LocalSet{
		Manager: images.Built{Ref: "capx.local/capx-manager:aaaaaaaaaaaa"},
		Modules: map[string]images.Built{
			"cluster": {Ref: "capx.local/captf-modules/cluster:bbbbbbbbbbbb"},
			"machine": {Ref: "capx.local/captf-modules/machine:cccccccccccc"},
		},
	}
	in := "image: capx.local/capx-manager:dev\nvalue: capx.local/capx-manager:dev\n" +
		"image: ${CAPTF_CLUSTER_MODULE_IMAGE:=capx.local/captf-modules/cluster:dev}\n" +
		"image: capx.local/captf-modules/machinepool:dev\n"
	out := string(withLocalImages([]byte(in), imgs))
	NewWithT(t).Expect(out).To(Equal("image: capx.local/capx-manager:aaaaaaaaaaaa\nvalue: capx.local/capx-manager:aaaaaaaaaaaa\n" +
		"image: ${CAPTF_CLUSTER_MODULE_IMAGE:=capx.local/captf-modules/cluster:bbbbbbbbbbbb}\n" +
		"image: capx.local/captf-modules/machinepool:dev\n"))
}

func TestWriteRepository(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	p := Paths{BinDir: "/opt/bin"}
	r, err := WriteRepository(p, dir, &Components{
		CAPIVersion: "v1.14.2", ProviderVersion: "v0.1.0",
		Core: []byte("core"), Provider: []byte("provider"), CoreMetadata: []byte("cm"), ProviderMetadata: []byte("pm"),
		Templates: map[string][]byte{"": []byte("default"), "local": []byte("local")},
	})
	g.Expect(err).NotTo(HaveOccurred())
	for path, want := range map[string]string{
		"cluster-api/v1.14.2/core-components.yaml":                  "core",
		"cluster-api/v1.14.2/metadata.yaml":                         "cm",
		"infrastructure-capx/v0.1.0/infrastructure-components.yaml": "provider",
		"infrastructure-capx/v0.1.0/metadata.yaml":                  "pm",
		"infrastructure-capx/v0.1.0/cluster-template.yaml":          "default",
		"infrastructure-capx/v0.1.0/cluster-template-local.yaml":    "local",
		"cert-manager/" + CertManagerVersion + "/cert-manager.yaml": certManagerStub,
	} {
		b, err := os.ReadFile(filepath.Join(dir, path))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(b)).To(Equal(want), path)
	}
	cfg, err := os.ReadFile(r.Config())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(cfg)).To(ContainSubstring("url: file://" + dir + "/cluster-api/v1.14.2/core-components.yaml"))
	g.Expect(string(cfg)).To(ContainSubstring("url: file://" + dir + "/infrastructure-capx/v0.1.0/infrastructure-components.yaml"))
	g.Expect(string(cfg)).To(ContainSubstring("url: file://" + dir + "/cert-manager/" + CertManagerVersion + "/cert-manager.yaml"))
	g.Expect(strings.Count(string(cfg), "type: ")).To(Equal(2))
}

func mustParse(t *testing.T, s string) Manifest {
	t.Helper()
	m, err := ParseManifest([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
