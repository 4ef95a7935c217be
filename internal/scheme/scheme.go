// Package scheme builds the runtime.Scheme every binary of the toolkit uses: the Kubernetes
// built-ins, Cluster API core, clusterctl's inventory, CRDs, and both providers' kinds.
package scheme

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
)

// New returns a scheme with every kind the toolkit reads or writes.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(clusterctlv1.AddToScheme(s))
	utilruntime.Must(captfv1.AddToScheme(s))
	utilruntime.Must(capvcov1.AddToScheme(s))
	return s
}
