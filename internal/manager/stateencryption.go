package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfcontrollers "github.com/capx-io/capx/internal/captf/controllers"
	"github.com/capx-io/capx/internal/captf/statekey"
	"github.com/capx-io/capx/internal/scheme"
)

// The state key endpoint's defaults: the Service config/manager installs in front of it.
const (
	DefaultStateEncryptionSecret = "captf-state-encryption"
	DefaultStateKeyAddress       = ":9443"
	stateKeyService              = "capx-state-key"
)

// StateEncryptionOptions turn on the key provider of CAPTF's state encryption (docs/captf/state.md).
type StateEncryptionOptions struct {
	// Enabled loads the master key and serves the endpoint; objects opt in per object.
	Enabled bool
	// Namespace and Secret name the master key Secret, in the manager's own namespace.
	Namespace, Secret string
	// Address is where the endpoint listens; URL is how runners reach it (its host is the
	// serving certificate's).
	Address, URL string
}

func addStateEncryptionFlags(fs *pflag.FlagSet) {
	fs.Bool("state-encryption", false, "Hold the master key of CAPTF state encryption and serve runners their state keys, so objects with spec.stateEncryption store their state encrypted (OpenTofu only). The key Secret is created on first start: back it up, every encrypted state needs it.")
	fs.String("state-encryption-namespace", "", "The manager's own namespace, which holds the master key Secret (tenants must not read it). Required with --state-encryption.")
	fs.String("state-encryption-secret", DefaultStateEncryptionSecret, "Name of the Secret holding the master key and the key endpoint's serving certificate.")
	fs.String("state-key-address", DefaultStateKeyAddress, "Address the state key endpoint (HTTPS, TLS 1.3) listens on, with --state-encryption.")
	fs.String("state-key-url", "", "The state key endpoint as runner Pods reach it, https://host[:port]/v1/state-key; its host is the serving certificate's. Default: https://"+stateKeyService+".<--state-encryption-namespace>.svc<:port of --state-key-address>/v1/state-key, the Service config/manager installs.")
}

func loadStateEncryption(v *viper.Viper) StateEncryptionOptions {
	return StateEncryptionOptions{
		Enabled:   v.GetBool("state-encryption"),
		Namespace: v.GetString("state-encryption-namespace"),
		Secret:    v.GetString("state-encryption-secret"),
		Address:   v.GetString("state-key-address"),
		URL:       v.GetString("state-key-url"),
	}
}

// endpoint is the URL runners use and the host the certificate must name.
func (o StateEncryptionOptions) endpoint() (*url.URL, error) {
	raw := o.URL
	if raw == "" {
		_, port, err := net.SplitHostPort(o.Address)
		if err != nil {
			return nil, fmt.Errorf("--state-key-address=%q: %w", o.Address, err)
		}
		raw = "https://" + net.JoinHostPort(stateKeyService+"."+o.Namespace+".svc", port) + statekey.Path
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("--state-key-url: %w", err)
	case u.Scheme != "https" || u.Hostname() == "" || u.Path != statekey.Path || u.RawQuery != "" || u.User != nil:
		return nil, fmt.Errorf("--state-key-url=%q: want https://host[:port]%s", raw, statekey.Path)
	}
	return u, nil
}

func (o StateEncryptionOptions) validate() error {
	if !o.Enabled {
		return nil
	}
	var errs []error
	if o.Namespace == "" {
		errs = append(errs, errors.New("--state-encryption needs --state-encryption-namespace: the manager's own namespace, where its master key Secret lives"))
	}
	if o.Secret == "" {
		errs = append(errs, errors.New("--state-encryption-secret must not be empty"))
	}
	if o.Namespace != "" {
		if _, err := o.endpoint(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// setUpStateEncryption loads (or creates) the master key Secret and adds the key endpoint to
// the manager as a Runnable served by every replica; nil without --state-encryption.
func setUpStateEncryption(ctx context.Context, cfg *rest.Config, mgr ctrl.Manager, o StateEncryptionOptions) (*captfcontrollers.StateEncryption, error) {
	if !o.Enabled {
		return nil, nil
	}
	u, err := o.endpoint()
	if err != nil {
		return nil, err
	}
	// The manager's client cannot read before the manager starts: load with a direct one.
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	mat, err := statekey.Load(ctx, c, o.Namespace, o.Secret, []string{u.Hostname()}, time.Now())
	if err != nil {
		return nil, fmt.Errorf("--state-encryption: %w", err)
	}
	srv := &statekey.Server{Master: mat.Master, Reviews: mgr.GetClient(), Reader: mgr.GetAPIReader(), Addr: o.Address, Cert: mat.Cert}
	if err := mgr.Add(srv); err != nil {
		return nil, err
	}
	ctrl.LoggerFrom(ctx).Info("State encryption on", "endpoint", u.String(), "masterKeyID", mat.Master.ID())
	return &captfcontrollers.StateEncryption{Master: mat.Master, URL: u.String(), CAPEM: string(mat.CAPEM)}, nil
}
