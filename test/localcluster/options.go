package localcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Options say which cluster to run and where. Only Name is usually set; everything else has a
// default derived from it.
type Options struct {
	// Name identifies the cluster: its folder, network namespace (capx-<name>), node name and
	// kubeconfig context. Lowercase letters, digits and '-', at most 12 characters. Default "mgmt".
	Name string
	// Dir is the cluster's folder. Default: $CAPX_CLUSTERS_DIR/<name>, else
	// <repository>/_artifacts/clusters/<name>. Kept short: unix socket paths live inside it.
	Dir string
	// BinDir holds etcd and the Kubernetes binaries (hack/toolchain.sh links them there).
	// Default <repository>/bin.
	BinDir string
	// APIServerPort is the host loopback port the API server is reached on. Default 16443 plus
	// the cluster's slot (0 for the first cluster running, 1 for the second, ...).
	APIServerPort int
	// PodCIDR and ServiceCIDR are the cluster's address ranges, inside its own namespace.
	// Defaults 10.<100+slot>.0.0/16 and 10.<200+slot>.0.0/16: the namespaces are separate, so
	// equal ranges would work too, but distinct ones make every address in a log name its cluster.
	PodCIDR, ServiceCIDR string
	// PodRoutes are further IPv4 prefixes the pods route to the node (their gateway), beyond the
	// Service range: the addresses of a platform network attached to the cluster later
	// (Platform.Attach), so that the managers' pods reach its load balancers and machines. Until
	// one is attached, the namespace has no route for them and a connection fails at once.
	PodRoutes []string
	// Progress receives one line per step of long operations. Default os.Stderr; io.Discard
	// silences it.
	Progress io.Writer
}

const (
	defaultName      = "mgmt"
	basePort         = 16443
	maxSlots         = 50
	modulePath       = "github.com/capx-io/capx"
	forwarderPackage = modulePath + "/test/localcluster/forwarder"
	netnsPrefix      = "capx-"
	maxDirLen        = 64 // kubelet and containerd put unix sockets up to ~45 characters below Dir
	apiserverPort    = 6443
	etcdClientPort   = 2379
	etcdPeerPort     = 2380
	clusterDomain    = "cluster.local"
	serviceIssuer    = "https://kubernetes.default.svc.cluster.local"
	stateFileName    = "cluster.json"
	kubeconfigName   = "kubeconfig"
)

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?$`)

// resolved holds the options with every default filled in.
type resolved struct {
	Options
	root string // repository root
}

func resolve(o Options) (resolved, error) {
	r := resolved{Options: o}
	if r.Name == "" {
		r.Name = defaultName
	}
	if !nameRE.MatchString(r.Name) {
		return r, fmt.Errorf("cluster name %q: want 1-12 lowercase letters, digits or '-' (it names a network namespace)", r.Name)
	}
	if r.Progress == nil {
		r.Progress = os.Stderr
	}
	// The repository provides the default folders and the module that go build runs in; without
	// it, explicit folders still work (go then runs in the current directory).
	root, err := RepoRoot()
	if err != nil && (r.Dir == "" && os.Getenv("CAPX_CLUSTERS_DIR") == "" || r.BinDir == "") {
		return r, err
	}
	r.root = root
	if r.Dir == "" {
		base := os.Getenv("CAPX_CLUSTERS_DIR")
		if base == "" {
			base = filepath.Join(r.root, "_artifacts", "clusters")
		}
		r.Dir = filepath.Join(base, r.Name)
	}
	dir, err := filepath.Abs(r.Dir)
	if err != nil {
		return r, err
	}
	r.Dir = dir
	if len(r.Dir) > maxDirLen {
		return r, fmt.Errorf("cluster folder %s is %d characters long; unix socket paths inside it would exceed the kernel's limit: use a folder of at most %d characters (Options.Dir, --dir or CAPX_CLUSTERS_DIR)", r.Dir, len(r.Dir), maxDirLen)
	}
	if r.BinDir == "" {
		r.BinDir = filepath.Join(r.root, "bin")
	}
	return r, nil
}

// RepoRoot finds the repository: $CAPX_ROOT, else the nearest parent of the working directory
// whose go.mod declares this module.
func RepoRoot() (string, error) {
	if root := os.Getenv("CAPX_ROOT"); root != "" {
		return root, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if isModuleRoot(d) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", fmt.Errorf("cannot find the %s repository from %s: set CAPX_ROOT, or Options.Dir and Options.BinDir", modulePath, dir)
}

func isModuleRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == modulePath
		}
	}
	return false
}

// layout is everything derived from the resolved options plus the slot: names, addresses,
// ports, paths. It is saved as cluster.json so that later commands (status, down, logs) and
// other processes see the same values.
type layout struct {
	Name          string `json:"name"`
	Dir           string `json:"dir"`
	BinDir        string `json:"binDir"`
	Slot          int    `json:"slot"`
	NetNS         string `json:"netns"`
	NodeName      string `json:"nodeName"`
	APIServerPort int    `json:"apiServerPort"`
	PodCIDR       string `json:"podCIDR"`
	ServiceCIDR   string `json:"serviceCIDR"`
	// NodeIP is the CNI bridge's address: the kubelet's node IP, the API server's advertised
	// address (so the kubernetes Service's endpoint is inside the namespace) and the pods' gateway.
	NodeIP string `json:"nodeIP"`
	// APIServiceIP is the first Service address: the kubernetes Service.
	APIServiceIP string `json:"apiServiceIP"`
	// PodRoutes are Options.PodRoutes, normalised.
	PodRoutes []string `json:"podRoutes,omitempty"`
}

func newLayout(r resolved, slot int) (layout, error) {
	l := layout{
		Name:          r.Name,
		Dir:           r.Dir,
		BinDir:        r.BinDir,
		Slot:          slot,
		NetNS:         netnsPrefix + r.Name,
		NodeName:      netnsPrefix + r.Name,
		APIServerPort: r.APIServerPort,
		PodCIDR:       r.PodCIDR,
		ServiceCIDR:   r.ServiceCIDR,
	}
	if l.APIServerPort == 0 {
		l.APIServerPort = basePort + slot
	}
	if l.PodCIDR == "" {
		l.PodCIDR = fmt.Sprintf("10.%d.0.0/16", 100+slot)
	}
	if l.ServiceCIDR == "" {
		l.ServiceCIDR = fmt.Sprintf("10.%d.0.0/16", 200+slot)
	}
	pods, err := netip.ParsePrefix(l.PodCIDR)
	if err != nil || !pods.Addr().Is4() || pods.Bits() > 24 {
		return l, fmt.Errorf("pod CIDR %q: want an IPv4 prefix of /24 or wider", l.PodCIDR)
	}
	svcs, err := netip.ParsePrefix(l.ServiceCIDR)
	if err != nil || !svcs.Addr().Is4() || svcs.Bits() > 24 {
		return l, fmt.Errorf("service CIDR %q: want an IPv4 prefix of /24 or wider", l.ServiceCIDR)
	}
	if pods.Overlaps(svcs) {
		return l, errors.New("pod and service CIDRs overlap")
	}
	for _, route := range r.PodRoutes {
		p, err := netip.ParsePrefix(route)
		if err != nil || !p.Addr().Is4() || p.Bits() == 0 {
			return l, fmt.Errorf("pod route %q: want an IPv4 prefix other than a default route", route)
		}
		if p.Overlaps(pods) || p.Overlaps(svcs) {
			return l, fmt.Errorf("pod route %s overlaps the pod or service CIDR", p)
		}
		l.PodRoutes = append(l.PodRoutes, p.Masked().String())
	}
	l.PodCIDR, l.ServiceCIDR = pods.Masked().String(), svcs.Masked().String()
	l.NodeIP = pods.Masked().Addr().Next().String()
	l.APIServiceIP = svcs.Masked().Addr().Next().String()
	return l, nil
}

// Paths inside the cluster folder. Logs stay after Down; everything else is runtime state.
func (l layout) path(elem ...string) string {
	return filepath.Join(append([]string{l.Dir}, elem...)...)
}
func (l layout) logDir() string          { return l.path("logs") }
func (l layout) runDir() string          { return l.path("run") }
func (l layout) pkiDir() string          { return l.path("pki") }
func (l layout) kubeconfig() string      { return l.path(kubeconfigName) }
func (l layout) containerdSock() string  { return l.path("containerd", "containerd.sock") }
func (l layout) kubeletDir() string      { return l.path("kubelet") }
func (l layout) netnsPath() string       { return filepath.Join(netnsDir, l.NetNS) }
func (l layout) logFile(d string) string { return filepath.Join(l.logDir(), d+".log") }
func (l layout) pidFile(d string) string { return filepath.Join(l.runDir(), d+".pid") }
func (l layout) bin(tool string) string  { return filepath.Join(l.BinDir, tool) }
