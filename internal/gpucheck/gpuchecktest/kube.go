package gpuchecktest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/testenv"
	"github.com/capx-io/capx/internal/vco"
)

// Kubernetes names the fixture uses on a real API server.
const (
	Namespace     = "ns"
	ClusterName   = "c1"
	SecretName    = "vco-credentials"
	holdFinalizer = "gpuchecktest.capx.io/hold"
)

// ApplyTo writes the fixture's management cluster to a real API server: namespace ns, the
// credential Secret (pointing at this simulator), VCOCluster ns/c1 and the machines, ns/m2
// held in deletion by a finalizer. It can run again for a new fixture on the same server.
func (f *Fixture) ApplyTo(ctx context.Context, c client.Client) error {
	if err := ignoreExists(c.Create(ctx, testenv.Namespace(Namespace))); err != nil {
		return err
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: SecretName}}
	data := map[string][]byte{vco.SecretKeyURL: []byte(f.Creds.URL), vco.SecretKeyCustomer: []byte(f.Creds.Customer),
		vco.SecretKeyJWT: []byte(f.Creds.JWT), vco.SecretKeyIAMURL: []byte(f.Creds.IAMURL)}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sec), sec); apierrors.IsNotFound(err) {
		sec.Data = data
		if err := c.Create(ctx, sec); err != nil {
			return err
		}
	} else if err != nil {
		return err
	} else {
		sec.Data = data
		if err := c.Update(ctx, sec); err != nil {
			return err
		}
	}
	if err := ignoreExists(c.Create(ctx, testenv.VCOCluster(Namespace, ClusterName, ClusterName, Loc, SecretName))); err != nil {
		return err
	}
	for _, m := range f.Cluster.Machines() {
		vm := testenv.VCOMachine(m.Namespace, m.Name, m.Cluster, 1)
		if m.Deleting {
			vm.Finalizers = []string{holdFinalizer}
		}
		err := c.Create(ctx, vm)
		if apierrors.IsAlreadyExists(err) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
				return err
			}
		} else if err != nil {
			return fmt.Errorf("creating VCOMachine %s/%s: %w", m.Namespace, m.Name, err)
		}
		if m.VMID != nil && !ptr.Equal(vm.Status.VMID, m.VMID) {
			vm.Status.VMID = ptr.To(*m.VMID)
			if err := c.Status().Update(ctx, vm); err != nil {
				return err
			}
		}
		if m.Deleting && vm.DeletionTimestamp.IsZero() {
			if err := c.Delete(ctx, vm); err != nil {
				return err
			}
		}
	}
	return nil
}

// AddMachineTo creates one more VCOMachine (a machine that comes back); it is deleted again
// by the returned function.
func AddMachineTo(ctx context.Context, c client.Client, namespace, name, cluster string) (func(), error) {
	vm := testenv.VCOMachine(namespace, name, cluster, 1)
	if err := c.Create(ctx, vm); err != nil {
		return nil, err
	}
	return func() {
		_ = c.Delete(context.Background(), &capvcov1.VCOMachine{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})
	}, nil
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
