package gpucheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/cli/cmdutil"
	"github.com/capx-io/capx/internal/gpucheck"
	"github.com/capx-io/capx/internal/vco"
)

// Ownership is --ownership: whether the management cluster is asked who owns each
// reservation.
type Ownership string

// The ownership modes.
const (
	// OwnershipAuto asks the management cluster when the kubeconfig reaches one, and says so
	// when it does not.
	OwnershipAuto Ownership = "auto"
	// OwnershipRequired fails (exit 2) when the management cluster cannot be asked.
	OwnershipRequired Ownership = "required"
	// OwnershipOff never asks: the seed's behaviour, names only.
	OwnershipOff Ownership = "off"
)

func (o *Ownership) String() string { return string(*o) }
func (o *Ownership) Type() string   { return "mode" }
func (o *Ownership) Set(s string) error {
	switch Ownership(s) {
	case OwnershipAuto, OwnershipRequired, OwnershipOff:
		*o = Ownership(s)
		return nil
	}
	return fmt.Errorf("unknown ownership mode %q: use auto, required or off", s)
}

// The defaults end a cron run that nothing answers within about a minute, with exit 2.
const (
	defaultTimeout        = time.Minute
	defaultClusterTimeout = 15 * time.Second
	defaultAPITimeout     = 20 * time.Second
	defaultAPIRetries     = 3
)

// Options are what both commands (and both binaries) share.
type Options struct {
	IO     *cmdutil.IOStreams
	Styles *cmdutil.Styles
	// Name is how the user runs the tool ("capvco-gpucheck", "kubectl capvco gpucheck"), for
	// messages that name a command.
	Name string
	// ReleaseCommand is the command that releases what this one lists.
	ReleaseCommand string

	Output    cmdutil.Format
	Locations []string
	Ownership Ownership
	// OnlyOrphans limits text output to orphans; All adds foreign reservations.
	OnlyOrphans, All bool
	PageSize         int
	// Timeout bounds a run (the time a question waits for its answer aside);
	// ClusterTimeout bounds each call to the management cluster. Zero means no bound.
	Timeout, ClusterTimeout time.Duration

	// Release.
	Yes             bool
	DryRun          bool
	AllowUnverified bool
	IncludeRenamed  bool
	IDs             []string

	// Standalone credential sources.
	Creds            CredentialFlags
	CredentialSecret string
	Getenv           func(string) string
	// AllowHTTP is --allow-http: plain http to any host (a simulator). A credential Secret
	// cannot ask for it.
	AllowHTTP bool

	// APITimeout bounds one API call; APIRetries bounds attempts of a transient failure.
	APITimeout time.Duration
	APIRetries int
	// VCO is the base client configuration (tests shorten backoffs through it).
	VCO vco.Options

	// Client is the management cluster (lazy: never built when not needed).
	Client func() (client.WithWatch, error)
	// Namespace is the default namespace of --credentials-secret NAME.
	Namespace func() (string, error)
	// Standalone is true for capvco-gpucheck, which also takes flags and the environment.
	Standalone bool

	// platforms are the scanned accounts' clients by finding label ("" for a single account).
	platforms map[string]gpucheck.Platform
}

func (o *Options) getenv(k string) string {
	if o.Getenv != nil {
		return o.Getenv(k)
	}
	return os.Getenv(k)
}

// addFlags adds the flags both commands take.
func (o *Options) addFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringSliceVar(&o.Locations, "location", nil, "Location to check (repeatable or comma-separated); default: every location of the customer.")
	o.Ownership = OwnershipAuto
	fs.Var(&o.Ownership, "ownership", "Ask the management cluster who owns each reservation: auto (when the kubeconfig reaches it), required, or off.")
	fs.IntVar(&o.PageSize, "page-size", gpucheck.DefaultPageSize, "Reservations per list call.")
	fs.DurationVar(&o.Timeout, "timeout", defaultTimeout, "Time the whole run may take (0: no limit); past it the run ends with exit 2 and concludes nothing.")
	fs.DurationVar(&o.ClusterTimeout, "cluster-timeout", defaultClusterTimeout, "Time one call to the management cluster may take (0: only --timeout), discovery included.")
	fs.DurationVar(&o.APITimeout, "api-timeout", defaultAPITimeout, "Time one whitesky.cloud API call may take.")
	fs.IntVar(&o.APIRetries, "api-retries", defaultAPIRetries, "Attempts of an API call that failed transiently (503, timeouts, 429).")
	cmdutil.AddOutputFlag(cmd, &o.Output)
	_ = cmd.RegisterFlagCompletionFunc("ownership", cobra.FixedCompletions([]string{"auto", "required", "off"}, cobra.ShellCompDirectiveNoFileComp))
}

// addCredentialFlags adds the credential sources.
func (o *Options) addCredentialFlags(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	if o.Standalone {
		fs.StringVar(&o.Creds.URL, "url", "", "whitesky.cloud API base, e.g. https://try.whitesky.cloud/api/1 (or $"+EnvURL+").")
		fs.StringVar(&o.Creds.Customer, "customer", "", "Customer id (or $"+EnvCustomer+").")
		fs.StringVar(&o.Creds.JWTFile, "jwt-file", "", "File holding a JWT (or $"+EnvJWT+").")
		fs.StringVar(&o.Creds.ClientID, "client-id", "", "Client id, exchanged with the client secret at --iam-url (or $"+EnvClientID+").")
		fs.StringVar(&o.Creds.ClientSecretFile, "client-secret-file", "", "File holding the client secret (or $"+EnvClientSecret+").")
		fs.StringVar(&o.Creds.IAMURL, "iam-url", "", "Token service base, needed for client credentials and JWT refresh (or $"+EnvIAMURL+").")
	}
	fs.StringVar(&o.CredentialSecret, "credentials-secret", "", "Read the credential from this Secret (NAMESPACE/NAME) through the kubeconfig; default: the Secrets every VCOCluster names.")
	fs.BoolVar(&o.AllowHTTP, "allow-http", false, "Send the token and client secret over plain http to any host (a whitesky.cloud simulator); loopback hosts never need it. Never for whitesky.cloud.")
}

// accounts resolves the credentials: flags, then the environment (standalone only), then
// --credentials-secret, then every VCOCluster's Secret.
func (o *Options) accounts(ctx context.Context) ([]Account, error) {
	if o.Standalone && (o.Creds.any() || envHasCredentials(o.getenv)) {
		a, err := o.Creds.fromFlags(o.getenv)
		if err != nil {
			return nil, err
		}
		return []Account{a}, nil
	}
	noCredentials := func(err error) error {
		if !o.Standalone || o.CredentialSecret != "" {
			return err
		}
		return fmt.Errorf("no credentials: pass --url, --customer and --jwt-file (or set %s, %s and %s), or --credentials-secret; "+
			"reading the VCOClusters' credential Secrets through the kubeconfig failed: %w", EnvURL, EnvCustomer, EnvJWT, err)
	}
	c, err := o.cluster(ctx)
	if err != nil {
		return nil, noCredentials(err)
	}
	if o.CredentialSecret != "" {
		ns := ""
		if o.Namespace != nil {
			if ns, err = o.Namespace(); err != nil {
				return nil, err
			}
		}
		key, err := parseSecretRef(o.CredentialSecret, ns)
		if err != nil {
			return nil, cmdutil.WithCode(cmdutil.ExitUsage, err)
		}
		a, err := accountFromSecret(ctx, c, key)
		if err != nil {
			return nil, err
		}
		return []Account{a}, nil
	}
	accounts, err := accountsFromClusters(ctx, c, "")
	if err != nil && len(accounts) == 0 {
		return nil, noCredentials(err)
	}
	return accounts, err
}

// managementCluster decides, per --ownership, whether reservations are checked against the
// management cluster, and returns its snapshot (nil and a note when not).
func (o *Options) managementCluster(ctx context.Context) (gpucheck.ManagementCluster, *gpucheck.Owners, string, error) {
	if o.Ownership == OwnershipOff {
		return nil, nil, "not checked (--ownership=off): names alone cannot tell owned from orphaned", nil
	}
	mc, owners, err := func() (gpucheck.ManagementCluster, *gpucheck.Owners, error) {
		c, err := o.cluster(ctx)
		if err != nil {
			return nil, nil, err
		}
		mc := gpucheck.Kube{Reader: c}
		owners, err := mc.Owners(ctx)
		return mc, owners, err
	}()
	if err == nil {
		return mc, owners, "", nil
	}
	if o.Ownership == OwnershipRequired {
		return nil, nil, "", fmt.Errorf("--ownership=required: the management cluster cannot be asked who owns the reservations: %w", err)
	}
	return nil, nil, fmt.Sprintf("not checked: the management cluster could not be asked (%v); names alone cannot tell owned from orphaned", err), nil
}

func (o *Options) vcoOptions() vco.Options {
	opts := o.VCO
	if o.APITimeout > 0 {
		opts.Timeout = o.APITimeout
	}
	if o.APIRetries > 0 {
		opts.MaxAttempts = o.APIRetries
	}
	opts.AllowHTTP = opts.AllowHTTP || o.AllowHTTP
	opts.Flags = vco.PolicyFlags{AllowHTTP: "--allow-http"}
	return opts
}

// scan sweeps every account. The report holds what was read even when err is set.
func (o *Options) scan(ctx context.Context) (*gpucheck.Report, gpucheck.ManagementCluster, error) {
	if o.PageSize <= 0 {
		return nil, nil, cmdutil.Usagef("--page-size must be positive")
	}
	accounts, err := o.accounts(ctx)
	if err != nil {
		return nil, nil, err
	}
	mc, owners, note, err := o.managementCluster(ctx)
	if err != nil {
		return nil, nil, err
	}
	rep := &gpucheck.Report{}
	var errs []error
	o.platforms = map[string]gpucheck.Platform{}
	for _, a := range accounts {
		c, err := vco.New(a.Creds, o.vcoOptions())
		if err != nil {
			return nil, nil, fmt.Errorf("%s (%s): %w", a.Label(), a.Source, err)
		}
		label := ""
		if len(accounts) > 1 {
			label = a.Label()
		}
		o.platforms[label] = c
		s := &gpucheck.Scanner{Platform: c, Account: label, Owners: owners, OwnershipNote: note, PageSize: o.PageSize}
		var p *progress
		if o.IO.ErrTTY {
			p = newProgress(o.IO.ErrOut, a.Label())
			s.Progress = p.page
		}
		r, err := s.Scan(ctx, o.Locations)
		p.done()
		rep.Merge(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w%s", a.Label(), err, locationHint(ctx, c, o.Locations, err)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return rep, mc, fmt.Errorf("the vGPU listing is incomplete, so nothing is concluded from it:\n%w", err)
	}
	return rep, mc, nil
}

// Check is the printed result of a check (kind GPUCheck).
type Check struct {
	cmdutil.TypeMeta `json:",inline"`
	// Listed says which reservations the report lists: "orphans", "capvco" (all but the
	// foreign ones) or "all"; the summary counts every one read.
	Listed          string `json:"listed"`
	gpucheck.Report `json:",inline"`
}

// Release is the printed result of a release (kind GPURelease).
type Release struct {
	cmdutil.TypeMeta `json:",inline"`
	Listed           string `json:"listed"`
	// DryRun is --dry-run: the results say what would be released; nothing was.
	DryRun          bool `json:"dryRun,omitempty"`
	gpucheck.Report `json:",inline"`
	Results         []gpucheck.ReleaseResult `json:"results"`
}

// check is the printed form of a report.
func (o *Options) check(rep *gpucheck.Report) Check {
	c := Check{TypeMeta: cmdutil.Meta("GPUCheck"), Listed: o.listed(), Report: *rep}
	c.Findings = o.shown(rep)
	return c
}

// release is the printed form of a release.
func (o *Options) release(rep *gpucheck.Report, results []gpucheck.ReleaseResult) Release {
	r := Release{TypeMeta: cmdutil.Meta("GPURelease"), Listed: o.listed(), DryRun: o.DryRun, Report: *rep, Results: results}
	r.Findings = o.shown(rep)
	if r.Results == nil {
		r.Results = []gpucheck.ReleaseResult{}
	}
	return r
}

// progress shows, on a terminal, how far a sweep has read: one line, rewritten in place.
type progress struct {
	mu      sync.Mutex
	w       io.Writer
	account string
	read    map[string][2]int
	shown   bool
}

func newProgress(w io.Writer, account string) *progress {
	return &progress{w: w, account: account, read: map[string][2]int{}}
}

func (p *progress) page(location string, read, count int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.read[location] = [2]int{read, count}
	total, of := 0, 0
	for _, rc := range p.read {
		total, of = total+rc[0], of+rc[1]
	}
	fmt.Fprintf(p.w, "\r\033[Kreading the vGPU reservations of %s: %d of %d in %d location(s)", p.account, total, of, len(p.read))
	p.shown = true
}

func (p *progress) done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// locationHint names the customer's locations when a --location was refused: most often a
// typo, or a location of another customer.
func locationHint(ctx context.Context, c *vco.Client, asked []string, err error) string {
	if len(asked) == 0 || !errors.Is(err, vco.ErrForbidden) {
		return ""
	}
	have, lerr := c.ListCustomerLocations(ctx)
	if lerr != nil {
		return ""
	}
	for _, l := range asked {
		if !slices.Contains(have, l) {
			return fmt.Sprintf("\n(the customer's locations are %s; --location %s is not one of them)", strings.Join(have, ", "), l)
		}
	}
	return ""
}
