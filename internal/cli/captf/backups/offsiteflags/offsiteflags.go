// Package offsiteflags is what `kubectl captf backups list --offsite` and `backups restore
// --from` share: the offsite target and its credential, from flags, the environment or a
// Secret the operator names.
package offsiteflags

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/offsite"
	"github.com/capx-io/capx/internal/cli/captf/objects"
)

// Environment variables read when the flags are not given.
const (
	EnvURL       = "CAPX_OFFSITE_BACKUP_URL"
	EnvAccessKey = "AWS_ACCESS_KEY_ID"
	EnvSecretKey = "AWS_SECRET_ACCESS_KEY"
)

// Flags are the offsite target flags.
type Flags struct {
	URL               string
	CredentialsSecret string
	// Getenv reads the environment (os.Getenv; tests replace it).
	Getenv func(string) string
}

// Add registers --offsite-url and --offsite-credentials-secret.
func (f *Flags) Add(fs *pflag.FlagSet) {
	f.Getenv = os.Getenv
	fs.StringVar(&f.URL, "offsite-url", "", "The offsite bucket, as the manager's --offsite-backup-url: https://host[:port]/bucket[/prefix] (default $"+EnvURL+").")
	fs.StringVar(&f.CredentialsSecret, "offsite-credentials-secret", "", "NAMESPACE/NAME of a Secret with the bucket's accessKey and secretKey (and ca.crt), e.g. the manager's; default: $"+EnvAccessKey+" and $"+EnvSecretKey+".")
}

// Store connects to the offsite target with the credential the flags name; c reads the
// credentials Secret with the user's own rights.
func (f *Flags) Store(ctx context.Context, c client.Reader) (*offsite.Store, error) {
	raw := f.URL
	if raw == "" {
		raw = f.Getenv(EnvURL)
	}
	if raw == "" {
		return nil, errors.New("name the offsite bucket with --offsite-url (or $" + EnvURL + "), as the manager's --offsite-backup-url")
	}
	t, err := offsite.ParseURL(raw)
	if err != nil {
		return nil, err
	}
	cred, err := f.credentials(ctx, c)
	if err != nil {
		return nil, err
	}
	return offsite.New(t, cred)
}

func (f *Flags) credentials(ctx context.Context, c client.Reader) (offsite.Credentials, error) {
	if f.CredentialsSecret == "" {
		cred := offsite.Credentials{AccessKey: f.Getenv(EnvAccessKey), SecretKey: f.Getenv(EnvSecretKey)}
		if cred.AccessKey == "" || cred.SecretKey == "" {
			return cred, errors.New("no offsite credential: set $" + EnvAccessKey + " and $" + EnvSecretKey + ", or name a Secret with --offsite-credentials-secret NAMESPACE/NAME")
		}
		return cred, nil
	}
	ns, name, ok := strings.Cut(f.CredentialsSecret, "/")
	if !ok || ns == "" || name == "" {
		return offsite.Credentials{}, fmt.Errorf("--offsite-credentials-secret %q: want NAMESPACE/NAME", f.CredentialsSecret)
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		if apierrors.IsForbidden(err) {
			return offsite.Credentials{}, fmt.Errorf("reading the offsite credential Secret %s needs get on Secrets in namespace %s: %w", f.CredentialsSecret, ns, err)
		}
		return offsite.Credentials{}, fmt.Errorf("read the offsite credential Secret %s: %w", f.CredentialsSecret, err)
	}
	cred, err := offsite.ParseCredentials(s.Data)
	if err != nil {
		return cred, fmt.Errorf("the offsite credential Secret %s: %w", f.CredentialsSecret, err)
	}
	return cred, nil
}

// Object is o as the offsite keys name it.
func Object(o *objects.Object) offsite.Object {
	return offsite.Object{Namespace: o.Namespace(), Kind: o.Kind, Name: o.Name()}
}
