// Package artifacts writes what is needed to see why an end-to-end run failed: every object of
// the kinds that matter (Cluster API, clusterctl, both providers, Jobs, Pods, Events, ...) as
// YAML, every container's log (previous instances too), the daemon logs of the local cluster,
// and `clusterctl describe` of every Cluster. Secrets are listed without their data.
//
// Layout, under the folder given to Collect:
//
//	resources/<resource>.yaml     kubectl get <resource> -A -o yaml
//	events.txt                    every Event, oldest first
//	pods/<ns>/<pod>/<container>.log (and <container>.previous.log)
//	daemons/<daemon>.log          the local cluster's daemons
//	network.txt                   the node's and the pods' network namespaces, and the probes
//	describe/<ns>-<cluster>.txt   clusterctl describe cluster --show-conditions all
//	errors.txt                    what could not be collected
package artifacts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capx-io/capx/test/e2e/install"
	"github.com/capx-io/capx/test/localcluster"
)

// groups whose every resource is dumped.
var groups = []string{"cluster.x-k8s.io", "infrastructure.cluster.x-k8s.io", "clusterctl.cluster.x-k8s.io",
	"addons.cluster.x-k8s.io", "runtime.cluster.x-k8s.io", "ipam.cluster.x-k8s.io"}

// builtins are dumped too; secrets are handled apart (no data).
var builtins = []string{"namespaces", "nodes", "pods", "jobs.batch", "deployments.apps", "replicasets.apps",
	"services", "endpointslices.discovery.k8s.io", "serviceaccounts", "configmaps", "leases.coordination.k8s.io",
	"roles.rbac.authorization.k8s.io", "rolebindings.rbac.authorization.k8s.io",
	"validatingadmissionpolicies.admissionregistration.k8s.io", "validatingadmissionpolicybindings.admissionregistration.k8s.io",
	"validatingwebhookconfigurations.admissionregistration.k8s.io", "mutatingwebhookconfigurations.admissionregistration.k8s.io",
	"customresourcedefinitions.apiextensions.k8s.io", "events.events.k8s.io"}

// Collect writes the artifacts of a management cluster into dir. It never stops at the first
// problem: what fails is recorded in errors.txt and returned joined.
func Collect(ctx context.Context, m *install.Management, repo *install.Repository, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c := &collector{m: m, dir: dir}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	c.daemonLogs(m.Cluster)
	if m.Status(ctx).Node.Ready || apiUp(ctx, m) {
		c.resources(ctx)
		c.secrets(ctx)
		c.events(ctx)
		c.podLogs(ctx)
		c.network(ctx)
		if repo != nil {
			c.describe(ctx, repo)
		}
	} else {
		c.fail(fmt.Errorf("the API server does not answer: only the daemon logs were collected"))
	}
	if len(c.errs) > 0 {
		_ = os.WriteFile(filepath.Join(dir, "errors.txt"), []byte(strings.Join(c.errs, "\n")+"\n"), 0o644)
		return fmt.Errorf("artifacts: %d problems, see %s", len(c.errs), filepath.Join(dir, "errors.txt"))
	}
	return nil
}

type collector struct {
	m    *install.Management
	dir  string
	errs []string
}

func (c *collector) fail(err error) {
	if err != nil {
		c.errs = append(c.errs, err.Error())
	}
}

func (c *collector) write(rel string, data []byte) {
	p := filepath.Join(c.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		c.fail(err)
		return
	}
	c.fail(os.WriteFile(p, data, 0o644))
}

func apiUp(ctx context.Context, m *install.Management) bool {
	_, err := m.Kubectl(ctx, nil, "get", "--raw", "/readyz")
	return err == nil
}

func (c *collector) daemonLogs(cl *localcluster.Cluster) {
	for _, d := range localcluster.DaemonNames() {
		b, err := os.ReadFile(cl.LogPath(d))
		if err != nil {
			c.fail(err)
			continue
		}
		c.write(filepath.Join("daemons", d+".log"), b)
	}
}

func (c *collector) resources(ctx context.Context) {
	resources := append([]string(nil), builtins...)
	for _, g := range groups {
		out, err := c.m.Kubectl(ctx, nil, "api-resources", "--api-group="+g, "--verbs=list", "-o", "name")
		if err != nil {
			c.fail(err)
			continue
		}
		resources = append(resources, strings.Fields(string(out))...)
	}
	for _, r := range resources {
		out, err := c.m.Kubectl(ctx, nil, "get", r, "-A", "-o", "yaml")
		if err != nil {
			c.fail(err)
			continue
		}
		c.write(filepath.Join("resources", r+".yaml"), out)
	}
}

// secrets lists Secrets with their metadata and key names only: they hold state and
// credentials.
func (c *collector) secrets(ctx context.Context) {
	cs, err := kubernetes.NewForConfig(c.m.Config)
	if err != nil {
		c.fail(err)
		return
	}
	list, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		c.fail(err)
		return
	}
	var b strings.Builder
	for _, s := range list.Items {
		keys := make([]string, 0, len(s.Data))
		size := 0
		for k, v := range s.Data {
			keys = append(keys, k)
			size += len(v)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "%s/%s type=%s keys=%s bytes=%d labels=%v owners=%s\n", s.Namespace, s.Name, s.Type,
			strings.Join(keys, ","), size, s.Labels, owners(s.OwnerReferences))
	}
	c.write("secrets.txt", []byte(b.String()))
}

func owners(refs []metav1.OwnerReference) string {
	var s []string
	for _, r := range refs {
		s = append(s, r.Kind+"/"+r.Name)
	}
	return strings.Join(s, ",")
}

func (c *collector) events(ctx context.Context) {
	out, err := c.m.Kubectl(ctx, nil, "get", "events", "-A", "--sort-by=.lastTimestamp",
		"-o", "custom-columns=LAST:.lastTimestamp,NAMESPACE:.metadata.namespace,TYPE:.type,REASON:.reason,OBJECT:.involvedObject.kind,NAME:.involvedObject.name,COUNT:.count,MESSAGE:.message")
	c.fail(err)
	c.write("events.txt", out)
}

func (c *collector) podLogs(ctx context.Context) {
	cs, err := kubernetes.NewForConfig(c.m.Config)
	if err != nil {
		c.fail(err)
		return
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		c.fail(err)
		return
	}
	for _, p := range pods.Items {
		statuses := append(append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...),
			p.Status.ContainerStatuses...), p.Status.EphemeralContainerStatuses...)
		for _, st := range statuses {
			if st.State.Waiting != nil && st.LastTerminationState.Terminated == nil && st.RestartCount == 0 {
				continue // never ran
			}
			base := filepath.Join("pods", p.Namespace, p.Name, st.Name)
			c.log(ctx, cs, p, st.Name, false, base+".log")
			if st.RestartCount > 0 {
				c.log(ctx, cs, p, st.Name, true, base+".previous.log")
			}
		}
	}
}

func (c *collector) log(ctx context.Context, cs kubernetes.Interface, p corev1.Pod, container string, previous bool, rel string) {
	b, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, Previous: previous, Timestamps: true}).DoRaw(ctx)
	if err != nil {
		c.fail(fmt.Errorf("log of %s/%s %s: %w", p.Namespace, p.Name, container, err))
		return
	}
	c.write(rel, b)
}

func (c *collector) describe(ctx context.Context, repo *install.Repository) {
	clusters := &clusterv1.ClusterList{}
	if err := c.m.Client.List(ctx, clusters); err != nil {
		c.fail(err)
		return
	}
	for _, cl := range clusters.Items {
		out, err := c.m.Describe(ctx, repo, cl.Namespace, cl.Name, "--show-conditions", "all")
		c.fail(err)
		c.write(filepath.Join("describe", cl.Namespace+"-"+cl.Name+".txt"), []byte(out))
	}
}
