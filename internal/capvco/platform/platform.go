// Package platform is the CAPVCO controllers' one door to whitesky.cloud: a Factory turns the
// credential Secret a VCOCluster names into a client. The controllers never build a client
// themselves, so tests hand them a factory pointed at an in-process simulator.
package platform

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/vco"
)

// Client is the part of the whitesky.cloud API the provider uses.
type Client interface {
	vco.Cloudspaces
	vco.VMs
	vco.Images
	vco.ServerPools
	vco.LoadBalancers
	vco.DNS
	vco.VGPUs
	vco.ConnectedCloudspaces
	vco.Certificates
}

// Factory returns the client for a credential.
type Factory interface {
	Client(creds vco.Credentials) (Client, error)
}

// VCOFactory is the production Factory: one shared *vco.Client per credential.
type VCOFactory struct{ *vco.Factory }

// Client implements Factory.
func (f VCOFactory) Client(creds vco.Credentials) (Client, error) { return f.Factory.Client(creds) }

// ClientFor reads the credential Secret namespace/name and returns its client: the cluster's
// credential and the operator credentials (image publishing, the certificate store) alike.
func ClientFor(ctx context.Context, c client.Reader, f Factory, namespace, name string) (Client, error) {
	creds, err := Credentials(ctx, c, namespace, name)
	if err != nil {
		return nil, err
	}
	// The factory applies the manager's endpoint policy (--vco-allow-http,
	// --vco-allowed-hosts): name the Secret whose URLs it refused.
	api, err := f.Client(creds)
	if err != nil {
		return nil, fmt.Errorf("Secret %s/%s: %w", namespace, name, err)
	}
	return api, nil
}

// ErrCredentialsNotFound is returned when the credential Secret does not exist.
var ErrCredentialsNotFound = errors.New("credential Secret not found")

// Credentials reads the credential Secret namespace/name. Errors name the Secret and its keys,
// never its values.
func Credentials(ctx context.Context, c client.Reader, namespace, name string) (vco.Credentials, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return vco.Credentials{}, fmt.Errorf("Secret %s/%s: %w", namespace, name, ErrCredentialsNotFound)
		}
		return vco.Credentials{}, fmt.Errorf("read Secret %s/%s: %w", namespace, name, err)
	}
	creds, err := vco.CredentialsFromSecret(s.Data)
	if err != nil {
		return vco.Credentials{}, fmt.Errorf("Secret %s/%s: %w", namespace, name, err)
	}
	return creds, nil
}
