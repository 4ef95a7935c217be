package statekey

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the manager's state-encryption Secret.
const (
	MasterKeyKey = "master-key"
	certKey      = corev1.TLSCertKey
	certKeyKey   = corev1.TLSPrivateKeyKey
)

// certValidity is the serving certificate's lifetime; it is renewed when less than a year is
// left, on the manager's next start.
const certValidity = 10 * 365 * 24 * time.Hour

// Material is what the manager loads at start: the master key, the endpoint's serving
// certificate and that certificate as the PEM the runners trust.
type Material struct {
	Master *Master
	Cert   tls.Certificate
	CAPEM  []byte
}

// Load reads the manager's state-encryption Secret namespace/name, creating it on first start
// (a random master key and a self-signed serving certificate for hosts), and renews the
// certificate when it does not cover hosts or expires within a year. The master key is never
// changed once written: every encrypted state depends on it.
func Load(ctx context.Context, c client.Client, namespace, name string, hosts []string, now time.Time) (*Material, error) {
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s)
	switch {
	case apierrors.IsNotFound(err):
		key := make([]byte, KeyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{MasterKeyKey: key}}
		if err := setCert(s, hosts, now); err != nil {
			return nil, err
		}
		if err := c.Create(ctx, s); err != nil {
			if apierrors.IsAlreadyExists(err) { // another replica was first
				return Load(ctx, c, namespace, name, hosts, now)
			}
			return nil, fmt.Errorf("statekey: create Secret %s/%s: %w", namespace, name, err)
		}
	case err != nil:
		return nil, fmt.Errorf("statekey: get Secret %s/%s: %w", namespace, name, err)
	default:
		if len(s.Data[MasterKeyKey]) != KeyBytes {
			return nil, fmt.Errorf("statekey: Secret %s/%s: key %q holds %d bytes, want %d; restore the Secret from the backup of this management cluster (every encrypted state needs it)",
				namespace, name, MasterKeyKey, len(s.Data[MasterKeyKey]), KeyBytes)
		}
		if !certCovers(s, hosts, now) {
			if err := setCert(s, hosts, now); err != nil {
				return nil, err
			}
			if err := c.Update(ctx, s); err != nil {
				return nil, fmt.Errorf("statekey: renew the certificate in Secret %s/%s: %w", namespace, name, err)
			}
		}
	}
	m, err := NewMaster(s.Data[MasterKeyKey])
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(s.Data[certKey], s.Data[certKeyKey])
	if err != nil {
		return nil, fmt.Errorf("statekey: Secret %s/%s: %w", namespace, name, err)
	}
	return &Material{Master: m, Cert: cert, CAPEM: s.Data[certKey]}, nil
}

func certCovers(s *corev1.Secret, hosts []string, now time.Time) bool {
	block, _ := pem.Decode(s.Data[certKey])
	if block == nil {
		return false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || now.Add(365*24*time.Hour).After(cert.NotAfter) {
		return false
	}
	if _, err := tls.X509KeyPair(s.Data[certKey], s.Data[certKeyKey]); err != nil {
		return false
	}
	for _, h := range hosts {
		if cert.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// setCert writes a new self-signed serving certificate for hosts (DNS names or IPs).
func setCert(s *corev1.Secret, hosts []string, now time.Time) error {
	if len(hosts) == 0 {
		return fmt.Errorf("statekey: the serving certificate needs a host name")
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	for _, h := range slices.Compact(slices.Sorted(slices.Values(hosts))) {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		return err
	}
	s.Data[certKey] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	s.Data[certKeyKey] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	return nil
}
