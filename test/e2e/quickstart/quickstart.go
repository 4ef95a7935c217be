// Package quickstart is what the quickstart puts on a management cluster once Cluster API and
// the providers are installed: the whitesky.cloud simulator (reachable from the manager's pod
// and, through a loopback port, from the host), the sample clusters, and the kubectl plugins'
// completion shims. hack/quickstart.sh (test/e2e/cmd/quickstart) runs it on the quickstart's
// cluster; the e2e suite runs the runbooks of docs/runbooks on what it sets up.
package quickstart

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/test/e2e/install"
)

// The samples.
const (
	// Namespace is the samples' namespace.
	Namespace = "quickstart"
	// CAPTFSample is the CAPTF cluster (the local template).
	CAPTFSample = "demo"
	// VCOSample is the CAPVCO cluster on the simulator (the vco-local template).
	VCOSample = "vco-demo"
)

// SimulatorEnvFile is the file, next to the cluster's kubeconfig, that holds the simulator's
// credentials with its host address as the tools' environment variables, for
// `. "$(dirname "$KUBECONFIG")/vcosim.env"`.
const SimulatorEnvFile = "vcosim.env"

// simulatorHostPortBase plus the cluster's API server port offset is the simulator's host
// port: 18080 for the first cluster, as 16443 is its API server's.
const simulatorHostPortBase = 18080

// Simulator is the simulator as the quickstart exposes it.
type Simulator struct {
	*install.Simulator
	// HostURL is its base URL from the host (http://127.0.0.1:<port>), where the in-cluster
	// URL of its credentials does not reach.
	HostURL string
	// EnvFile holds its credentials with HostURL, as VCO_* variables.
	EnvFile string
}

// DeploySimulator runs the simulator in the cluster with its credentials Secret in namespace,
// checks that the manager's pod reaches it, and exposes it on the host's loopback with its
// credentials (rewritten to that address) in the env file next to the kubeconfig. Repeating it
// replaces the forward and rewrites the file.
func DeploySimulator(ctx context.Context, m *install.Management, kit *install.Kit, namespace string, progress func(format string, a ...any)) (*Simulator, error) {
	sim, err := m.DeploySimulator(ctx, kit.Images.VCOSim.Ref, namespace)
	if err != nil {
		return nil, err
	}
	manager, err := managerPod(ctx, m)
	if err != nil {
		return nil, err
	}
	creds := sim.Credentials.StringData
	// A just-available Deployment's Service may refuse connections for a moment.
	probe, err := m.ProbeFromPodUntilAnswered(ctx, manager, kit.Images.HTTPGet.Ref,
		creds["url"]+"/customers/"+creds["customer"]+"/cloudspaces", creds["jwt"], time.Minute)
	if err != nil {
		return nil, err
	}
	progress("the manager's pod reaches the simulator: %s", firstLine(probe))

	in, err := url.Parse(sim.URL)
	if err != nil {
		return nil, fmt.Errorf("the simulator's URL %q: %w", sim.URL, err)
	}
	addr, err := m.Forward(ctx, "vcosim", HostPort(m.APIServerPort()), in.Host)
	if err != nil {
		return nil, err
	}
	s := &Simulator{Simulator: sim, HostURL: "http://" + addr, EnvFile: filepath.Join(filepath.Dir(m.Kubeconfig()), SimulatorEnvFile)}
	if err := os.WriteFile(s.EnvFile, []byte(EnvFile(creds, sim.URL, s.HostURL)), 0o600); err != nil {
		return nil, err
	}
	progress("the host reaches it at %s (credentials for the tools: %s)", s.HostURL, s.EnvFile)
	return s, nil
}

// HostPort is the simulator's host port for the cluster whose API server has apiServerPort:
// 18080 for the first cluster (16443), one more for each next.
func HostPort(apiServerPort int) int { return simulatorHostPortBase + apiServerPort - 16443 }

// EnvFile renders the simulator's credentials (the printed Secret's stringData) as the
// environment capvco-gpucheck reads, with every URL under the in-cluster base inURL moved to
// the host's hostURL.
func EnvFile(creds map[string]string, inURL, hostURL string) string {
	names := map[string]string{
		"url": "VCO_URL", "iamURL": "VCO_IAM_URL", "customer": "VCO_CUSTOMER", "jwt": "VCO_JWT",
		"clientID": "VCO_CLIENT_ID", "clientSecret": "VCO_CLIENT_SECRET",
	}
	var lines []string
	for key, env := range names {
		v, ok := creds[key]
		if !ok {
			continue
		}
		if key == "url" || key == "iamURL" {
			v = hostURL + strings.TrimPrefix(v, inURL)
		}
		lines = append(lines, "export "+env+"="+shellQuote(v))
	}
	sort.Strings(lines)
	return "# The quickstart's whitesky.cloud simulator as this host reaches it (a loopback port forwarded\n" +
		"# into the cluster's network namespace), for capvco-gpucheck. Written by hack/quickstart.sh up.\n" +
		strings.Join(lines, "\n") + "\n"
}

// shellQuote quotes s for a POSIX shell: single quotes, each one inside closed and escaped.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Samples creates the sample clusters in namespace and waits until both are provisioned.
func Samples(ctx context.Context, m *install.Management, kit *install.Kit, namespace string) error {
	if _, err := m.ApplyCluster(ctx, kit.Repository, install.ClusterSpec{Name: CAPTFSample, Namespace: namespace, Flavor: install.FlavorLocal, Workers: 2}); err != nil {
		return err
	}
	if _, err := m.ApplyCluster(ctx, kit.Repository, install.ClusterSpec{Name: VCOSample, Namespace: namespace, Flavor: install.FlavorVCOLocal}); err != nil {
		return err
	}
	if err := m.WaitProvisioned(ctx, namespace, CAPTFSample, 10*time.Minute); err != nil {
		return err
	}
	return m.WaitProvisioned(ctx, namespace, VCOSample, 5*time.Minute)
}

// managerPod finds the running capx manager pod.
func managerPod(ctx context.Context, m *install.Management) (client.ObjectKey, error) {
	pods := &corev1.PodList{}
	if err := m.Client.List(ctx, pods, client.InNamespace(install.ProviderNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": "capx", "app.kubernetes.io/component": "manager"}); err != nil {
		return client.ObjectKey{}, err
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return client.ObjectKeyFromObject(&p), nil
		}
	}
	return client.ObjectKey{}, errors.New("no running capx manager pod")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
