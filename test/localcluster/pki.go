package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The identities of the cluster. Each component authenticates with its own client certificate,
// with the user and group names Kubernetes' bootstrap RBAC policy expects.
type identity struct {
	file   string // base name of its certificate, key and kubeconfig
	cn     string
	groups []string
}

func identities(nodeName string) []identity {
	return []identity{
		{"admin", "capx-admin", []string{"system:masters"}},
		{"kube-controller-manager", "system:kube-controller-manager", nil},
		{"kube-scheduler", "system:kube-scheduler", nil},
		{"kubelet", "system:node:" + nodeName, []string{"system:nodes"}},
		{"kube-proxy", "system:kube-proxy", nil},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}},
	}
}

type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// writePKI creates the cluster's CA, the API server's serving certificate, one client
// certificate and kubeconfig per identity, and the service-account signing key. ECDSA P-256
// throughout: generating RSA keys would cost seconds on two cores for no benefit here.
func writePKI(l layout) error {
	dir := l.pkiDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := newCert(nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "capx-" + l.Name + "-ca"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	})
	if err != nil {
		return err
	}
	if err := writePair(dir, "ca", ca); err != nil {
		return err
	}
	serving, err := newCert(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc." + clusterDomain},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(l.NodeIP), net.ParseIP(l.APIServiceIP)},
	})
	if err != nil {
		return err
	}
	if err := writePair(dir, "apiserver", serving); err != nil {
		return err
	}
	for _, id := range identities(l.NodeName) {
		kp, err := newCert(ca, &x509.Certificate{
			Subject:     pkix.Name{CommonName: id.cn, Organization: id.groups},
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		if err != nil {
			return err
		}
		if err := writePair(dir, id.file, kp); err != nil {
			return err
		}
		// Daemons inside the namespace use the API server on its loopback; the admin kubeconfig
		// (for the host) goes through the forwarder on the host's loopback.
		server, path := fmt.Sprintf("https://127.0.0.1:%d", apiserverPort), filepath.Join(dir, id.file+".kubeconfig")
		if id.file == "admin" {
			server, path = fmt.Sprintf("https://127.0.0.1:%d", l.APIServerPort), l.kubeconfig()
		}
		if err := writeKubeconfig(path, "capx-"+l.Name, server, id.cn, ca.cert, kp); err != nil {
			return err
		}
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "sa.key"), "PRIVATE KEY", mustPKCS8(saKey), 0o600); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub, 0o644)
}

func newCert(parent *keyPair, tmpl *x509.Certificate) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	// A minute of slack for clock differences; a year is far beyond any test cluster's life.
	tmpl.NotBefore = time.Now().Add(-time.Minute)
	tmpl.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, fmt.Errorf("certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

func writePair(dir, name string, kp *keyPair) error {
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", kp.cert.Raw, 0o644); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, name+".key"), "PRIVATE KEY", mustPKCS8(kp.key), 0o600)
}

func mustPKCS8(key crypto.Signer) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err) // only fails for key types we never create
	}
	return der
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

func writeKubeconfig(path, name, server, user string, ca *x509.Certificate, kp *keyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   server,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
	}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.cert.Raw}),
		ClientKeyData:         pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: mustPKCS8(kp.key)}),
	}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = name
	return clientcmd.WriteToFile(*cfg, path)
}
