package manager

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/capx-io/capx/internal/captf/offsite"
	"github.com/capx-io/capx/internal/capvco/addons"
	"github.com/capx-io/capx/internal/vco"
)

// Providers the manager can run.
const (
	ProviderCAPTF  = "captf"
	ProviderCAPVCO = "capvco"
)

// Options are the manager's settings. Every flag can also come from the environment
// (CAPX_<FLAG_NAME>, e.g. CAPX_WATCH_FILTER) or from a YAML file given with --config.
type Options struct {
	Providers   []string
	Kubeconfig  string
	Namespace   string
	WatchFilter string
	SyncPeriod  time.Duration

	LeaderElect              bool
	LeaderElectionID         string
	LeaderElectionNamespace  string
	LeaderElectLeaseDuration time.Duration
	LeaderElectRenewDeadline time.Duration
	LeaderElectRetryPeriod   time.Duration

	HealthAddr   string
	MetricsAddr  string
	ProfilerAddr string

	Concurrency map[string]int

	// CAPTF engine settings.
	RunnerImage            string
	StateBackups           int
	DriftInterval          time.Duration
	MachineDriftInterval   time.Duration
	MaxConcurrentDriftJobs int
	MaxActiveJobs          int
	NamespaceMaxActiveJobs int
	ClusterMaxActiveJobs   int
	ClusterOperationGate   bool
	DestroyNamespacePrefix string
	// OffsiteBackupURL is where copies of the state backups go ("": nowhere); the credential
	// is the mounted Secret in OffsiteBackupCredentials.
	OffsiteBackupURL         string
	OffsiteBackupCredentials string
	// StateEncryption is the key provider of CAPTF's state encryption (stateencryption.go).
	StateEncryption StateEncryptionOptions

	// CAPVCO client settings: where tenants' credential Secrets may send the manager.
	VCOAllowHTTP    bool
	VCOAllowedHosts []string

	// CAPVCO add-on images (docs/capvco/addons.md): the repository of the project's images, and
	// single components' overrides.
	CAPVCOAddonImageRepository string
	CAPVCOAddonImages          map[string]string

	// SkipControllerNameValidation lets several managers run one after another in one process,
	// as tests do (controller-runtime refuses a controller name it saw before). No flag sets it.
	SkipControllerNameValidation bool
}

// DefaultDestroyNamespacePrefix starts the name of the namespace, one per namespace being
// deleted, where the objects deleted with it are destroyed.
const DefaultDestroyNamespacePrefix = "captf-destroy-"

// DefaultOffsiteBackupCredentials is where config/manager mounts the offsite credential Secret.
const DefaultOffsiteBackupCredentials = "/etc/captf/offsite-backup"

// maxDestroyNamespacePrefix leaves room for a namespace UID (36 characters) in a namespace name.
const maxDestroyNamespacePrefix = 63 - 36

// concurrencyKinds are the kinds with a --<kind>-concurrency flag.
var concurrencyKinds = []string{
	"terraformcluster", "terraformmachine", "terraformmachinepool", "vcocluster", "vcomachine",
}

// AddFlags registers the flags.
func AddFlags(fs *pflag.FlagSet) {
	fs.StringSlice("providers", []string{ProviderCAPTF, ProviderCAPVCO}, "Providers to run: captf, capvco or both.")
	fs.String("kubeconfig", "", "Kubeconfig of the management cluster (default: in-cluster config, then $KUBECONFIG).")
	fs.String("namespace", "", "Watch only this namespace (default: all namespaces).")
	fs.String("watch-filter", "", "Reconcile only objects labelled cluster.x-k8s.io/watch-filter=<value>.")
	fs.Duration("sync-period", 10*time.Minute, "Minimum interval at which every watched object is reconciled again.")
	fs.Bool("leader-elect", false, "Elect a leader so only one replica reconciles.")
	fs.String("leader-elect-id", "", "Name of the leader-election Lease (default: derived from --providers, --namespace and --watch-filter, so managers scoped differently never contend).")
	fs.String("leader-elect-namespace", "", "Namespace of the leader-election Lease (default: the manager's own namespace).")
	fs.Duration("leader-elect-lease-duration", 15*time.Second, "Leader-election lease duration.")
	fs.Duration("leader-elect-renew-deadline", 10*time.Second, "Leader-election renew deadline.")
	fs.Duration("leader-elect-retry-period", 2*time.Second, "Leader-election retry period.")
	fs.String("health-addr", ":9440", "Address of the /healthz and /readyz probes.")
	fs.String("metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	fs.String("profiler-address", "", "Address of Go's /debug/pprof endpoints (heap, CPU, goroutines), for profiling a running manager; empty (the default) serves none. Bind it to localhost: it is unauthenticated.")
	fs.String("runner-image", "", "Image CAPTF Jobs copy the runner from: the manager's own image (env CAPX_RUNNER_IMAGE). Required with --providers=captf.")
	fs.Int("state-backups", 5, "Complete state backups kept per CAPTF object; 0 takes no new backups (existing ones stay restorable).")
	fs.String("offsite-backup-url", "", "Copy every complete CAPTF state backup off the cluster to this S3-compatible bucket (a whitesky.cloud objectspace): https://host[:port]/bucket[/prefix][?region=R]. Keys are <prefix>/<namespace>/<kind>/<name>/<serial>-<sha256>.tfstate.gz; empty: no copies.")
	fs.String("offsite-backup-credentials", DefaultOffsiteBackupCredentials, "Directory of the mounted Secret (in the manager's namespace) with the offsite bucket's credential: files accessKey, secretKey and optionally ca.crt; read again for every upload.")
	addStateEncryptionFlags(fs)
	fs.Duration("drift-interval", 30*time.Minute, "Default interval between drift checks of TerraformClusters and TerraformMachinePools (machines: --machine-drift-interval); 0 disables them unless an object or its TerraformCluster's defaults set one.")
	fs.Duration("machine-drift-interval", 6*time.Hour, "Default interval between drift checks of TerraformMachines, which are applied once and never re-applied, so drift is only reported; 0 disables them unless a machine or its TerraformCluster's defaults set one.")
	fs.Int("max-concurrent-drift-jobs", 20, "Budget of CAPTF drift-check Jobs running at once across the manager: a due check waits for a free one (applies, destroys and refreshes never do); 0 means no budget.")
	fs.Bool("cluster-operation-gate", true, "Serialise a TerraformCluster's applies with its machines' and pools' Jobs through a per-cluster Lease.")
	fs.String("destroy-namespace-prefix", DefaultDestroyNamespacePrefix, "Prefix of the destroy namespaces: the infrastructure of CAPTF objects deleted with their namespace (Kubernetes creates nothing in a namespace being deleted) is destroyed, by copies, in a namespace of that namespace's own, <prefix><namespace UID>, created when first needed and deleted once empty. Empty: no destroy elsewhere, such a deletion holds the namespace until the object is set to deletionPolicy Retain.")
	fs.Int("max-active-jobs", 200, "Cap on CAPTF Jobs running at once across the manager; 0 means no cap.")
	fs.Int("namespace-max-active-jobs", 50, "Cap on CAPTF Jobs running at once per namespace, so one tenant cannot take every slot; a TerraformCluster's spec.maxActiveJobs never goes above it. 0 means no cap.")
	fs.Int("cluster-max-active-jobs", 20, "Cap on CAPTF Jobs running at once per Cluster, unless its TerraformCluster sets spec.maxActiveJobs; 0 means no cap.")
	for _, k := range concurrencyKinds {
		fs.Int(k+"-concurrency", 10, fmt.Sprintf("Concurrent reconciles of %s objects (caps reconciles, not Jobs).", k))
	}
	fs.Bool("vco-allow-http", false, "Let CAPVCO send tokens and client secrets over plain http to any host a credential Secret names (a whitesky.cloud simulator in the cluster); never for whitesky.cloud. Loopback hosts never need it; a Secret cannot ask for it.")
	fs.String("capvco-addon-image-repository", addons.DefaultImageRepository, "Registry and organisation of the project's images CAPVCO installs into every workload cluster, as <repository>/<component>:<manager version>.")
	fs.StringSlice("capvco-addon-image", nil, "The image of one add-on component, <component>=<image> (repeatable or comma-separated), e.g. capvco-cloud-controller-manager=registry.example.com/ccm:v1. Components: "+strings.Join(addons.Components(), ", ")+".")
	fs.StringSlice("vco-allowed-hosts", nil, "The only hosts (host or host:port, comma-separated) CAPVCO credential Secrets' url and iamURL may name; empty: any host. A link-local or metadata address such as 169.254.169.254 is refused unless listed.")
}

// Load reads the options from viper (flags, environment, config file) and validates them; every
// problem is reported at once.
func Load(v *viper.Viper) (*Options, error) {
	o := &Options{
		Providers:                v.GetStringSlice("providers"),
		Kubeconfig:               v.GetString("kubeconfig"),
		Namespace:                v.GetString("namespace"),
		WatchFilter:              v.GetString("watch-filter"),
		SyncPeriod:               v.GetDuration("sync-period"),
		LeaderElect:              v.GetBool("leader-elect"),
		LeaderElectionID:         v.GetString("leader-elect-id"),
		LeaderElectionNamespace:  v.GetString("leader-elect-namespace"),
		LeaderElectLeaseDuration: v.GetDuration("leader-elect-lease-duration"),
		LeaderElectRenewDeadline: v.GetDuration("leader-elect-renew-deadline"),
		LeaderElectRetryPeriod:   v.GetDuration("leader-elect-retry-period"),
		HealthAddr:               v.GetString("health-addr"),
		MetricsAddr:              v.GetString("metrics-bind-address"),
		ProfilerAddr:             v.GetString("profiler-address"),
		Concurrency:              map[string]int{},
		VCOAllowHTTP:             v.GetBool("vco-allow-http"),
		RunnerImage:              v.GetString("runner-image"),
		StateBackups:             v.GetInt("state-backups"),
		DriftInterval:            v.GetDuration("drift-interval"),
		MachineDriftInterval:     v.GetDuration("machine-drift-interval"),
		MaxConcurrentDriftJobs:   v.GetInt("max-concurrent-drift-jobs"),
		MaxActiveJobs:            v.GetInt("max-active-jobs"),
		NamespaceMaxActiveJobs:   v.GetInt("namespace-max-active-jobs"),
		ClusterMaxActiveJobs:     v.GetInt("cluster-max-active-jobs"),
		ClusterOperationGate:     v.GetBool("cluster-operation-gate"),
		DestroyNamespacePrefix:   v.GetString("destroy-namespace-prefix"),
		OffsiteBackupURL:         v.GetString("offsite-backup-url"),
		OffsiteBackupCredentials: v.GetString("offsite-backup-credentials"),
		StateEncryption:          loadStateEncryption(v),
	}
	for _, k := range concurrencyKinds {
		o.Concurrency[k] = v.GetInt(k + "-concurrency")
	}
	// A comma-separated environment value arrives as one element.
	if len(o.Providers) == 1 && strings.Contains(o.Providers[0], ",") {
		o.Providers = strings.Split(o.Providers[0], ",")
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = defaultLeaderElectionID(o)
	}
	hosts, err := vco.ParseAllowedHosts("--vco-allowed-hosts", splitCommas(v.GetStringSlice("vco-allowed-hosts")))
	o.VCOAllowedHosts = hosts
	o.CAPVCOAddonImageRepository = v.GetString("capvco-addon-image-repository")
	images, imgErr := parseAddonImages(splitCommas(v.GetStringSlice("capvco-addon-image")))
	o.CAPVCOAddonImages = images
	return o, errors.Join(err, imgErr, o.validate())
}

// parseAddonImages reads --capvco-addon-image entries, <component>=<image>.
func parseAddonImages(entries []string) (map[string]string, error) {
	var errs []error
	out := map[string]string{}
	for _, e := range entries {
		if strings.TrimSpace(e) == "" {
			continue
		}
		name, img, ok := strings.Cut(strings.TrimSpace(e), "=")
		switch {
		case !ok || name == "" || img == "":
			errs = append(errs, fmt.Errorf("--capvco-addon-image %q: want <component>=<image>", e))
		case !slices.Contains(addons.Components(), name):
			errs = append(errs, fmt.Errorf("--capvco-addon-image %q: unknown component %q (known: %s)", e, name, strings.Join(addons.Components(), ", ")))
		default:
			out[name] = img
		}
	}
	return out, errors.Join(errs...)
}

// splitCommas splits every element at commas: an environment or config-file value arrives as
// one element (or as space-separated ones), a flag's as many.
func splitCommas(in []string) []string {
	var out []string
	for _, e := range in {
		out = append(out, strings.Split(e, ",")...)
	}
	return out
}

func (o *Options) validate() error {
	var errs []error
	if len(o.Providers) == 0 {
		errs = append(errs, errors.New("--providers: name at least one of captf, capvco"))
	}
	for _, p := range o.Providers {
		if p != ProviderCAPTF && p != ProviderCAPVCO {
			errs = append(errs, fmt.Errorf("--providers: unknown provider %q (known: captf, capvco)", p))
		}
	}
	if o.SyncPeriod <= 0 {
		errs = append(errs, errors.New("--sync-period must be positive"))
	}
	if o.LeaderElectRenewDeadline >= o.LeaderElectLeaseDuration {
		errs = append(errs, errors.New("--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration"))
	}
	if o.Runs(ProviderCAPTF) && o.RunnerImage == "" {
		errs = append(errs, errors.New("--runner-image (or CAPX_RUNNER_IMAGE) is required with the captf provider: every CAPTF Job copies its runner from the manager's image"))
	}
	for name, n := range map[string]int{"--state-backups": o.StateBackups, "--max-active-jobs": o.MaxActiveJobs,
		"--namespace-max-active-jobs": o.NamespaceMaxActiveJobs, "--cluster-max-active-jobs": o.ClusterMaxActiveJobs,
		"--max-concurrent-drift-jobs": o.MaxConcurrentDriftJobs} {
		if n < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative", name))
		}
	}
	if p := o.DestroyNamespacePrefix; p != "" {
		// A UID is lower-case hex and dashes: the prefix and a UID make a namespace name when
		// the prefix with one hex digit after it is one.
		if msgs := validation.IsDNS1123Label(p + "0"); len(msgs) > 0 || len(p) > maxDestroyNamespacePrefix {
			errs = append(errs, fmt.Errorf("--destroy-namespace-prefix=%q: with a namespace UID after it, it must make a namespace name "+
				"(lower-case letters, digits and '-', starting with a letter or digit, at most %d characters)", p, maxDestroyNamespacePrefix))
		}
	}
	if o.OffsiteBackupURL != "" {
		if _, err := o.OffsiteUploader(); err != nil {
			errs = append(errs, fmt.Errorf("--offsite-backup-url: %w", err))
		}
	}
	if err := o.StateEncryption.validate(); err != nil {
		errs = append(errs, err)
	}
	if o.DriftInterval < 0 {
		errs = append(errs, errors.New("--drift-interval must not be negative"))
	}
	if o.MachineDriftInterval < 0 {
		errs = append(errs, errors.New("--machine-drift-interval must not be negative"))
	}
	for _, k := range concurrencyKinds {
		if o.Concurrency[k] < 1 {
			errs = append(errs, fmt.Errorf("--%s-concurrency must be at least 1", k))
		}
	}
	return errors.Join(errs...)
}

// OffsiteUploader is the offsite target of --offsite-backup-url, nil without one. The
// credential is read here once, so a missing or empty one stops the manager at start.
func (o *Options) OffsiteUploader() (*offsite.Uploader, error) {
	if o.OffsiteBackupURL == "" {
		return nil, nil
	}
	t, err := offsite.ParseURL(o.OffsiteBackupURL)
	if err != nil {
		return nil, err
	}
	if _, err := offsite.ReadCredentials(o.OffsiteBackupCredentials); err != nil {
		return nil, fmt.Errorf("%w (--offsite-backup-credentials=%s)", err, o.OffsiteBackupCredentials)
	}
	return offsite.NewUploader(t, o.OffsiteBackupCredentials), nil
}

// Runs reports whether a provider is enabled.
func (o *Options) Runs(provider string) bool { return slices.Contains(o.Providers, provider) }

// defaultLeaderElectionID derives the Lease name from what the manager watches, so two managers
// scoped to different namespaces or watch filters each lead their own scope.
func defaultLeaderElectionID(o *Options) string {
	p := slices.Clone(o.Providers)
	slices.Sort(p)
	sum := sha256.Sum256([]byte(strings.Join(p, ",") + "|" + o.Namespace + "|" + o.WatchFilter))
	return "capx-manager-" + hex.EncodeToString(sum[:])[:10]
}
