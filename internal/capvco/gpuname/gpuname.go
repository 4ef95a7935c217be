// Package gpuname is the one place that builds and parses the names of CAPVCO's vGPU
// reservations.
//
// A reservation on whitesky.cloud has no owner, label or tag field, and it is billed from the
// moment it is reserved until it is released permanently. CAPVCO therefore encodes the owner in
// the reservation name:
//
//	capvco_<namespace>_<cluster>_<machine>_gpu_<n>
//
// The separator is the underscore because no Kubernetes namespace, cluster or machine name can
// contain one, so ownership is an exact parse rather than a prefix guess: Parse accepts a name
// only when every field is a valid Kubernetes name and <n> is a canonical decimal index, and
// Build(Parse(x)) == x for every accepted x.
//
// A name that starts with "capvco" but does not parse (for example one renamed in the portal)
// is no longer recognisably anybody's: Classify reports it as Renamed so that tools can list it
// as a straggler, while the provider's teardown leaves it alone.
package gpuname

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// Prefix starts every reservation name CAPVCO builds.
	Prefix = "capvco"
	// sep separates the fields; no Kubernetes object name contains it.
	sep = "_"
	// gpuField precedes the index.
	gpuField = "gpu"
	// MaxIndex bounds the index: a VCOMachine asks for at most 8 vGPUs, and a bound keeps the
	// parse exact and cheap.
	MaxIndex = 63
)

// Owner is the Kubernetes object a reservation belongs to: the VCOMachine
// <Namespace>/<Machine> of the Cluster <Namespace>/<Cluster>.
type Owner struct {
	Namespace string
	Cluster   string
	Machine   string
}

// Name is a parsed reservation name: its owner and the index of the vGPU on that machine.
type Name struct {
	Owner
	Index int
}

// String renders the reservation name. It is only meaningful for a Name that Validate accepts.
func (n Name) String() string {
	return strings.Join([]string{Prefix, n.Namespace, n.Cluster, n.Machine, gpuField, strconv.Itoa(n.Index)}, sep)
}

// Validate says why n cannot be rendered as a name that parses back to itself.
func (n Name) Validate() error {
	if errs := validation.IsDNS1123Label(n.Namespace); len(errs) > 0 {
		return fmt.Errorf("namespace %q: %s", n.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(n.Cluster); len(errs) > 0 {
		return fmt.Errorf("cluster %q: %s", n.Cluster, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(n.Machine); len(errs) > 0 {
		return fmt.Errorf("machine %q: %s", n.Machine, strings.Join(errs, "; "))
	}
	if n.Index < 0 || n.Index > MaxIndex {
		return fmt.Errorf("index %d: must be between 0 and %d", n.Index, MaxIndex)
	}
	return nil
}

// Build returns the name of vGPU number index of the machine owner.
func Build(owner Owner, index int) (string, error) {
	n := Name{Owner: owner, Index: index}
	if err := n.Validate(); err != nil {
		return "", fmt.Errorf("vGPU reservation name: %w", err)
	}
	return n.String(), nil
}

// ErrNotOurs is wrapped by every Parse error.
var ErrNotOurs = errors.New("not a CAPVCO vGPU reservation name")

// Parse is the exact inverse of Build: it accepts name only when Build would have produced it.
func Parse(name string) (Name, error) {
	fail := func(why string) (Name, error) {
		return Name{}, fmt.Errorf("%w: %q: %s", ErrNotOurs, name, why)
	}
	parts := strings.Split(name, sep)
	if len(parts) != 6 {
		return fail("want capvco_<namespace>_<cluster>_<machine>_gpu_<n>")
	}
	if parts[0] != Prefix {
		return fail("does not start with " + Prefix + sep)
	}
	if parts[4] != gpuField {
		return fail("the fifth field is not " + gpuField)
	}
	idx, err := parseIndex(parts[5])
	if err != nil {
		return fail(err.Error())
	}
	n := Name{Owner: Owner{Namespace: parts[1], Cluster: parts[2], Machine: parts[3]}, Index: idx}
	if err := n.Validate(); err != nil {
		return fail(err.Error())
	}
	return n, nil
}

// parseIndex accepts only canonical decimals (no sign, no leading zero), so that the parse is
// exact: "gpu_01" is not vGPU 1.
func parseIndex(s string) (int, error) {
	if s == "" || len(s) > 2 || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("index %q is not a canonical number", s)
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("index %q is not a canonical number", s)
		}
	}
	i, _ := strconv.Atoi(s)
	if i > MaxIndex {
		return 0, fmt.Errorf("index %d is above %d", i, MaxIndex)
	}
	return i, nil
}

// LooksOurs says whether name starts with "capvco" (in any case), whether or not it parses:
// the names a person would recognise as CAPVCO's.
func LooksOurs(name string) bool {
	return len(name) >= len(Prefix) && strings.EqualFold(name[:len(Prefix)], Prefix)
}

// Class is what a reservation name says about its owner.
type Class int

const (
	// Foreign names were not built by CAPVCO: leave them alone.
	Foreign Class = iota
	// Owned names parse exactly: Parse names their owner.
	Owned
	// Renamed names look like CAPVCO's but do not parse (renamed in the portal, truncated,
	// hand-made): nobody can prove ownership, so the provider never releases them and tools
	// list them as stragglers.
	Renamed
)

func (c Class) String() string {
	switch c {
	case Owned:
		return "owned"
	case Renamed:
		return "renamed"
	default:
		return "foreign"
	}
}

// Classify sorts a reservation name into Owned, Renamed or Foreign.
func Classify(name string) Class {
	if _, err := Parse(name); err == nil {
		return Owned
	}
	if LooksOurs(name) {
		return Renamed
	}
	return Foreign
}

// OwnedByCluster reports whether name is a reservation of any machine of the Cluster
// namespace/cluster: the exact test cluster teardown uses to release what it owns and nothing else.
func OwnedByCluster(name, namespace, cluster string) bool {
	n, err := Parse(name)
	return err == nil && n.Namespace == namespace && n.Cluster == cluster
}

// OwnedByMachine reports whether name is a reservation of the machine owner.
func OwnedByMachine(name string, owner Owner) bool {
	n, err := Parse(name)
	return err == nil && n.Owner == owner
}
