package localcluster

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Files of a machine's pki/ folder beyond the local cluster's own names (ca.crt, apiserver.crt,
// sa.key, <identity>.kubeconfig, ...).
const (
	bootstrapKubeconfig = "bootstrap.kubeconfig"
	// kubeletKubeconfig is written by the kubelet once its CSR is signed; kube-proxy uses it too.
	kubeletKubeconfig = "kubelet.kubeconfig"
	kubeletCertDir    = "kubelet"
)

// writeNodePKI writes what a machine needs from its bootstrap document: the CA and a bootstrap
// kubeconfig for its kubelet, and on a control-plane machine the API server's serving and
// kubelet-client certificates, the service-account keys and the controllers' and an admin's
// kubeconfigs (these reach the API server on the machine's loopback). The kubelet's own
// certificate, once signed, stays across reboots; the rest is written again at each boot.
func writeNodePKI(l layout, nb NodeBootstrap, serviceIP string) error {
	dir := l.pkiDir()
	if err := os.MkdirAll(filepath.Join(dir, kubeletCertDir), 0o700); err != nil {
		return err
	}
	caCert, err := parseCertPEM(nb.CACert)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), []byte(nb.CACert), 0o644); err != nil {
		return err
	}
	if err := writeTokenKubeconfig(filepath.Join(dir, bootstrapKubeconfig), nb.Cluster, "https://"+nb.Endpoint, nb.Token, caCert); err != nil {
		return err
	}
	if nb.Role != RoleControlPlane {
		return nil
	}
	caKey, err := parseKeyPEM(nb.CAKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.key"), []byte(nb.CAKey), 0o600); err != nil {
		return err
	}
	ca := &keyPair{cert: caCert, key: caKey}
	host, _, _ := net.SplitHostPort(nb.Endpoint)
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(l.NodeIP), net.ParseIP(serviceIP)}
	var names []string
	if ip := net.ParseIP(host); ip != nil {
		ips = append(ips, ip)
	} else {
		names = append(names, host)
	}
	serving, err := newCert(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: append(names, "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc."+clusterDomain),
		IPAddresses: ips,
	})
	if err != nil {
		return err
	}
	if err := writePair(dir, "apiserver", serving); err != nil {
		return err
	}
	for _, id := range []identity{
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}},
		{"kube-controller-manager", "system:kube-controller-manager", nil},
		{"kube-scheduler", "system:kube-scheduler", nil},
		{"admin", "capx-node-admin", []string{"system:masters"}},
	} {
		kp, err := newClientCert(ca, id)
		if err != nil {
			return err
		}
		if err := writePair(dir, id.file, kp); err != nil {
			return err
		}
		server := fmt.Sprintf("https://127.0.0.1:%d", apiserverPort)
		if err := writeKubeconfig(filepath.Join(dir, id.file+".kubeconfig"), nb.Cluster, server, id.cn, caCert, kp); err != nil {
			return err
		}
	}
	saKey, err := parseKeyPEM(nb.ServiceAccountKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), []byte(nb.ServiceAccountKey), 0o600); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub, 0o644)
}

func newClientCert(ca *keyPair, id identity) (*keyPair, error) {
	return newCert(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: id.cn, Organization: id.groups},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func writeTokenKubeconfig(path, name, server, token string, ca *x509.Certificate) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})}
	cfg.AuthInfos["kubelet-bootstrap"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: "kubelet-bootstrap"}
	cfg.CurrentContext = name
	return clientcmd.WriteToFile(*cfg, path)
}

// AdminKubeconfig is a kubeconfig for the cluster with a client certificate of user in
// system:masters, signed by the cluster CA: what a control-plane provider writes into the
// <cluster>-kubeconfig Secret for Cluster API.
func (s ClusterSecrets) AdminKubeconfig(cluster, server, user string) ([]byte, error) {
	caCert, err := parseCertPEM(s.CACert)
	if err != nil {
		return nil, err
	}
	caKey, err := parseKeyPEM(s.CAKey)
	if err != nil {
		return nil, err
	}
	kp, err := newClientCert(&keyPair{cert: caCert, key: caKey}, identity{cn: user, groups: []string{"system:masters"}})
	if err != nil {
		return nil, err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: []byte(s.CACert)}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.cert.Raw}),
		ClientKeyData:         pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: mustPKCS8(kp.key)}),
	}
	ctx := user + "@" + cluster
	cfg.Contexts[ctx] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: user}
	cfg.CurrentContext = ctx
	return clientcmd.Write(*cfg)
}

// firstService is the first address of a Service range: the kubernetes Service.
func firstService(cidr string) (string, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", err
	}
	return p.Masked().Addr().Next().String(), nil
}
