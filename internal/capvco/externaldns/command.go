package externaldns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"

	"github.com/capx-io/capx/internal/capvco/ccm/config"
	"github.com/capx-io/capx/internal/vco"
)

// DefaultListen is where the webhook serves: loopback, since external-dns runs beside it in
// the same Pod.
const DefaultListen = "127.0.0.1:8888"

const example = `  # Beside external-dns in one Pod (docs/capvco/external-dns.md); external-dns runs with
  # --provider=webhook and generous webhook timeouts:
  capvco-external-dns-webhook --credentials-dir=/etc/capvco/credentials \
    --cloudspace-id=4b1e0c6a-... --domain-filter=apps.example.com`

type options struct {
	credentialsDir string
	cloudspaces    []string
	include        []string
	exclude        []string
	listen         string
	writeTimeout   time.Duration
	parallel       int
	platform       config.Platform
}

// NewCommand is the capvco-external-dns-webhook command. It serves until ctx ends.
func NewCommand(ctx context.Context) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "capvco-external-dns-webhook",
		Short: "The whitesky.cloud DNS provider of ExternalDNS, over its webhook protocol",
		Long: `capvco-external-dns-webhook lets external-dns (--provider=webhook) manage whitesky.cloud DNS
records for a CAPVCO cluster: A records on the cluster's cloudspaces (the platform takes their
address from the cloudspace's public IP), TXT and CNAME records on the customer. Platform writes
take about 30 s each; a change set is applied in ordered phases and answered only when all of it
is done. docs/capvco/external-dns.md describes it.`,
		Example:       example,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          func(cmd *cobra.Command, _ []string) error { return o.run(ctx) },
	}
	f := cmd.Flags()
	f.StringVar(&o.credentialsDir, "credentials-dir", "/etc/capvco/credentials", "the credential Secret mounted as files (url, customer, and jwt or clientID + clientSecret + iamURL); read again on every call")
	f.StringSliceVar(&o.cloudspaces, "cloudspace-id", nil, "a cloudspace of the cluster (repeat for every site): its records are visible and its public IP may be an A record's target")
	f.StringSliceVar(&o.include, "domain-filter", nil, "a domain this webhook manages (repeatable); names below it match too. Empty: every domain")
	f.StringSliceVar(&o.exclude, "exclude-domains", nil, "a domain left alone even below a --domain-filter domain (repeatable)")
	f.StringVar(&o.listen, "listen", DefaultListen, "the address the webhook protocol is served on")
	f.DurationVar(&o.writeTimeout, "write-timeout", DefaultWriteTimeout, "how long one platform DNS write (about 30 s) may take before it counts as failed")
	f.IntVar(&o.parallel, "parallel-writes", DefaultParallelWrites, "how many platform writes of one phase are in flight at once")
	config.BindPlatformFlags(f, &o.platform)
	return cmd
}

func (o options) run(ctx context.Context) error {
	if len(o.cloudspaces) == 0 {
		return errors.New("--cloudspace-id is required: name every cloudspace of the cluster")
	}
	if o.parallel < 1 {
		return fmt.Errorf("--parallel-writes %d: at least 1", o.parallel)
	}
	creds := config.Config{CredentialsDir: o.credentialsDir}
	if _, err := creds.Credentials(); err != nil {
		return err
	}
	policy, err := config.FlagClientOptions(o.platform)
	if err != nil {
		return err
	}
	log := funcr.NewJSON(func(obj string) { fmt.Fprintln(os.Stderr, obj) }, funcr.Options{})
	p := &Provider{
		API: &reloading{dir: creds, factory: vco.NewFactory(policy)}, Cloudspaces: o.cloudspaces,
		Filter: DomainFilter{Include: o.include, Exclude: o.exclude}, WriteTimeout: o.writeTimeout, ParallelWrites: o.parallel, Log: log,
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	// No write timeout: a change set's answer waits for its platform writes, each bounded by
	// --write-timeout. external-dns's own --webhook-provider-*-timeout bound the call.
	srv := &http.Server{Handler: Handler(p), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	log.Info("serving the ExternalDNS webhook protocol", "address", ln.Addr().String(), "cloudspaces", o.cloudspaces, "domains", p.Filter.String())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// reloading reads the credential files on every call, so a rotated Secret is used as soon as
// the kubelet has updated them; the factory keeps one client per distinct credential.
type reloading struct {
	dir     config.Config
	factory *vco.Factory
}

func (r *reloading) client() (*vco.Client, error) {
	creds, err := r.dir.Credentials()
	if err != nil {
		return nil, err
	}
	return r.factory.Client(creds)
}

func (r *reloading) ListCustomerDNSRecords(ctx context.Context) ([]vco.DNSRecord, error) {
	c, err := r.client()
	if err != nil {
		return nil, err
	}
	return c.ListCustomerDNSRecords(ctx)
}

func (r *reloading) CreateCloudspaceDNSRecord(ctx context.Context, cs string, spec vco.DNSRecordSpec) error {
	c, err := r.client()
	if err != nil {
		return err
	}
	return c.CreateCloudspaceDNSRecord(ctx, cs, spec)
}

func (r *reloading) DeleteCloudspaceDNSRecord(ctx context.Context, cs, domain, typ string) error {
	c, err := r.client()
	if err != nil {
		return err
	}
	return c.DeleteCloudspaceDNSRecord(ctx, cs, domain, typ)
}

func (r *reloading) CreateCustomerDNSRecord(ctx context.Context, spec vco.DNSRecordSpec) error {
	c, err := r.client()
	if err != nil {
		return err
	}
	return c.CreateCustomerDNSRecord(ctx, spec)
}

func (r *reloading) DeleteCustomerDNSRecord(ctx context.Context, domain, typ, value string) error {
	c, err := r.client()
	if err != nil {
		return err
	}
	return c.DeleteCustomerDNSRecord(ctx, domain, typ, value)
}

func (r *reloading) GetCloudspace(ctx context.Context, id string) (vco.Cloudspace, error) {
	c, err := r.client()
	if err != nil {
		return vco.Cloudspace{}, err
	}
	return c.GetCloudspace(ctx, id)
}
