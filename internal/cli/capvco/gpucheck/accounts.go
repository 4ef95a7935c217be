package gpucheck

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/vco"
)

// Account is one whitesky.cloud credential to sweep, and where it came from.
type Account struct {
	// Source says where the credential was read ("flags", "environment", "Secret ns/name").
	Source string
	Creds  vco.Credentials
}

// Label names the account in reports: the customer and the API host, never a secret.
func (a Account) Label() string {
	host := a.Creds.URL
	if u, err := url.Parse(a.Creds.URL); err == nil && u.Host != "" {
		host = u.Host
	}
	return a.Creds.Customer + "@" + host
}

// Environment variables the standalone tool reads credentials from.
const (
	EnvURL          = "VCO_URL"
	EnvCustomer     = "VCO_CUSTOMER"
	EnvJWT          = "VCO_JWT"
	EnvClientID     = "VCO_CLIENT_ID"
	EnvClientSecret = "VCO_CLIENT_SECRET"
	EnvIAMURL       = "VCO_IAM_URL"
)

// CredentialFlags are the standalone tool's credential flags. Secrets are read from files
// (or the environment) so they never show in a process listing.
type CredentialFlags struct {
	URL, Customer, JWTFile, ClientID, ClientSecretFile, IAMURL string
}

func (c CredentialFlags) any() bool {
	return c.URL != "" || c.Customer != "" || c.JWTFile != "" || c.ClientID != "" || c.ClientSecretFile != "" || c.IAMURL != ""
}

// fromFlags builds the credential from the flags, filling gaps from the environment.
func (c CredentialFlags) fromFlags(getenv func(string) string) (Account, error) {
	cr := vco.Credentials{URL: c.URL, Customer: c.Customer, ClientID: c.ClientID, IAMURL: c.IAMURL}
	read := func(path, what string) (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", what, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	var err error
	if c.JWTFile != "" {
		if cr.JWT, err = read(c.JWTFile, "--jwt-file"); err != nil {
			return Account{}, err
		}
	}
	if c.ClientSecretFile != "" {
		if cr.ClientSecret, err = read(c.ClientSecretFile, "--client-secret-file"); err != nil {
			return Account{}, err
		}
	}
	fill := func(p *string, env string) {
		if *p == "" {
			*p = strings.TrimSpace(getenv(env))
		}
	}
	fill(&cr.URL, EnvURL)
	fill(&cr.Customer, EnvCustomer)
	fill(&cr.JWT, EnvJWT)
	fill(&cr.ClientID, EnvClientID)
	fill(&cr.ClientSecret, EnvClientSecret)
	fill(&cr.IAMURL, EnvIAMURL)
	source := "environment"
	if c.any() {
		source = "flags"
	}
	if err := cr.Validate(); err != nil {
		return Account{}, fmt.Errorf("credentials from %s: %w", source, err)
	}
	return Account{Source: source, Creds: cr}, nil
}

func envHasCredentials(getenv func(string) string) bool {
	for _, k := range []string{EnvURL, EnvCustomer, EnvJWT, EnvClientID, EnvClientSecret} {
		if getenv(k) != "" {
			return true
		}
	}
	return false
}

// accountFromSecret reads a credential Secret (keys url, customer, jwt | clientID and
// clientSecret, iamURL).
func accountFromSecret(ctx context.Context, c client.Reader, key types.NamespacedName) (Account, error) {
	var s corev1.Secret
	if err := c.Get(ctx, key, &s); err != nil {
		return Account{}, fmt.Errorf("reading the credential Secret %s: %w", key, err)
	}
	creds, err := vco.CredentialsFromSecret(s.Data)
	if err != nil {
		return Account{}, fmt.Errorf("the credential Secret %s: %w", key, err)
	}
	return Account{Source: "Secret " + key.String(), Creds: creds}, nil
}

// accountsFromClusters reads the credential Secret of every VCOCluster (in namespace, or
// every namespace when it is ""), one account per customer and API: a sweep lists each
// account once however many clusters share it.
func accountsFromClusters(ctx context.Context, c client.Reader, namespace string) ([]Account, error) {
	var list capvcov1.VCOClusterList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing VCOClusters to find their credential Secrets: %w", err)
	}
	seenSecret := map[types.NamespacedName]bool{}
	seenAccount := map[string]bool{}
	var out []Account
	var errs []error
	for _, vc := range list.Items {
		key := types.NamespacedName{Namespace: vc.Namespace, Name: vc.Spec.CredentialsRef.Name}
		if key.Name == "" || seenSecret[key] {
			continue
		}
		seenSecret[key] = true
		a, err := accountFromSecret(ctx, c, key)
		if err != nil {
			errs = append(errs, fmt.Errorf("VCOCluster %s/%s: %w", vc.Namespace, vc.Name, err))
			continue
		}
		id := a.Creds.URL + "\x00" + a.Creds.Customer
		if !seenAccount[id] {
			seenAccount[id] = true
			out = append(out, a)
		}
	}
	if len(errs) > 0 {
		// A credential that cannot be read is an account that cannot be swept: the sweep
		// would be incomplete, so it is an error rather than a warning.
		return out, errors.Join(errs...)
	}
	if len(out) == 0 {
		where := "any namespace"
		if namespace != "" {
			where = "namespace " + namespace
		}
		return nil, fmt.Errorf("no VCOCluster in %s names a credential Secret: pass --credentials-secret NAMESPACE/NAME", where)
	}
	slices.SortFunc(out, func(a, b Account) int { return strings.Compare(a.Label(), b.Label()) })
	return out, nil
}

// parseSecretRef reads NAMESPACE/NAME (or NAME in defaultNamespace).
func parseSecretRef(ref, defaultNamespace string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		ns, name = defaultNamespace, ref
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("--credentials-secret %q: want NAMESPACE/NAME", ref)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
