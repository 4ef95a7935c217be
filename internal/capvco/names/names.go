// Package names builds the deterministic names CAPVCO gives platform objects, and the provider
// IDs of its machines. Deterministic names are what lets a moved cluster (status dropped) find
// its infrastructure again, and what lets a create whose outcome was unknown be found rather
// than repeated. vGPU reservation names live in gpuname, which tools share.
package names

import (
	"fmt"
	"strconv"
	"strings"
)

// PrimarySite names the site in spec.location.
const PrimarySite = "primary"

// Cloudspace is the name of a site's cloudspace: capvco_<namespace>_<cluster>_<site>.
func Cloudspace(namespace, cluster, site string) string {
	return strings.Join([]string{"capvco", namespace, cluster, site}, "_")
}

// APIServer names the control-plane load balancer and its server pool.
func APIServer(namespace, cluster string) string {
	return strings.Join([]string{"capvco", namespace, cluster, "apiserver"}, "_")
}

// VM is the name of a machine's VM (and its hostname): the machine name, unique in the
// cluster's cloudspaces because it is unique in the namespace.
func VM(machine string) string { return machine }

// ProviderID is vco://<location>/<vm id>.
func ProviderID(location string, vmID int) string {
	return fmt.Sprintf("vco://%s/%d", location, vmID)
}

// ParseProviderID is the inverse of ProviderID.
func ParseProviderID(id string) (location string, vmID int, err error) {
	rest, ok := strings.CutPrefix(id, "vco://")
	loc, num, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || loc == "" {
		return "", 0, fmt.Errorf("provider ID %q: want vco://<location>/<vm id>", id)
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 || strconv.Itoa(n) != num {
		return "", 0, fmt.Errorf("provider ID %q: the VM id is not a positive number", id)
	}
	return loc, n, nil
}
