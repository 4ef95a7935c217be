package offsite

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Target is a bucket and a key prefix on an S3-compatible endpoint.
type Target struct {
	// Endpoint is host[:port].
	Endpoint string
	// Insecure is plain http: only ever to a loopback host (a test server).
	Insecure bool
	Bucket   string
	// Prefix starts every key ("" for none), without slashes at either end.
	Prefix string
	// Region is sent in signatures; objectspaces and most S3-compatible servers ignore it.
	Region string
}

// DefaultRegion is the region signed for when the URL names none.
const DefaultRegion = "us-east-1"

// ParseURL reads https://host[:port]/bucket[/prefix][?region=R]: the form of
// --offsite-backup-url (path-style, as objectspaces serve buckets). http:// is accepted only for
// a loopback host.
func ParseURL(raw string) (Target, error) {
	bad := func(why string) (Target, error) {
		return Target{}, fmt.Errorf("offsite URL %q: %s (want https://host[:port]/bucket[/prefix][?region=R])", raw, why)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("does not parse")
	}
	t := Target{Endpoint: u.Host, Region: DefaultRegion}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopback(u.Hostname()) {
			return bad("plain http is allowed only to a loopback host; the credential would travel in the clear")
		}
		t.Insecure = true
	default:
		return bad("the scheme must be https")
	}
	if u.User != nil {
		return bad("put the credential in the credentials Secret, never in the URL")
	}
	if u.Host == "" {
		return bad("no host")
	}
	for k, v := range u.Query() {
		if k != "region" || len(v) != 1 || v[0] == "" {
			return bad("the only query parameter is region=<name>")
		}
		t.Region = v[0]
	}
	if u.Fragment != "" {
		return bad("no fragment")
	}
	path := strings.Trim(u.Path, "/")
	t.Bucket, t.Prefix, _ = strings.Cut(path, "/")
	if !bucketRE.MatchString(t.Bucket) {
		return bad("the bucket name must be 3 to 63 lower-case letters, digits, '.' and '-'")
	}
	if t.Prefix != "" && !prefixRE.MatchString(t.Prefix) {
		return bad("the prefix may hold only letters, digits, '.', '_', '-' and '/'")
	}
	for _, seg := range strings.Split(t.Prefix, "/") {
		if t.Prefix != "" && (seg == "" || seg == "." || seg == "..") {
			return bad("the prefix has an empty, . or .. segment")
		}
	}
	return t, nil
}

var (
	bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	prefixRE = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)
)

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// String is the URL ParseURL reads back.
func (t Target) String() string {
	scheme := "https"
	if t.Insecure {
		scheme = "http"
	}
	s := scheme + "://" + t.Endpoint + "/" + t.Bucket
	if t.Prefix != "" {
		s += "/" + t.Prefix
	}
	if t.Region != "" && t.Region != DefaultRegion {
		s += "?region=" + url.QueryEscape(t.Region)
	}
	return s
}

// Location is where one copy is, as s3://bucket/key (status and the CLI print it; restore
// --from reads it).
func (t Target) Location(key string) string { return "s3://" + t.Bucket + "/" + key }

// ParseLocation reads s3://bucket/key; the bucket must be t's.
func (t Target) ParseLocation(loc string) (string, error) {
	rest, ok := strings.CutPrefix(loc, "s3://")
	bucket, key, _ := strings.Cut(rest, "/")
	switch {
	case !ok || bucket == "" || key == "":
		return "", fmt.Errorf("offsite location %q: want s3://<bucket>/<key>", loc)
	case bucket != t.Bucket:
		return "", fmt.Errorf("offsite location %q: bucket %q is not the offsite target's bucket %q", loc, bucket, t.Bucket)
	}
	return key, nil
}

// Credentials are an S3 access key.
type Credentials struct {
	AccessKey string
	SecretKey string
	// CABundle is PEM: the certificates the endpoint's may chain to instead of the system's.
	CABundle []byte
}

// The file names in a credentials directory (a mounted Secret's keys).
const (
	AccessKeyFile = "accessKey"
	SecretKeyFile = "secretKey"
	CABundleFile  = "ca.crt"
)

// ReadCredentials reads a mounted credentials Secret: accessKey, secretKey and optionally
// ca.crt. The manager reads it again for every upload, so a rotated Secret is used once the
// kubelet has refreshed the files.
func ReadCredentials(dir string) (Credentials, error) {
	data := map[string][]byte{}
	for _, name := range []string{AccessKeyFile, SecretKeyFile, CABundleFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		switch {
		case name == CABundleFile && errors.Is(err, os.ErrNotExist):
		case err != nil:
			return Credentials{}, fmt.Errorf("offsite: read the credential: %w (mount the credentials Secret with keys %s and %s there)", err, AccessKeyFile, SecretKeyFile)
		default:
			data[name] = b
		}
	}
	return ParseCredentials(data)
}

// ParseCredentials reads a credentials Secret's data: accessKey, secretKey, optional ca.crt.
func ParseCredentials(data map[string][]byte) (Credentials, error) {
	c := Credentials{AccessKey: strings.TrimSpace(string(data[AccessKeyFile])), SecretKey: strings.TrimSpace(string(data[SecretKeyFile])),
		CABundle: data[CABundleFile]}
	return c, c.validate()
}

func (c Credentials) validate() error {
	if c.AccessKey == "" || c.SecretKey == "" {
		return fmt.Errorf("offsite: the credential lacks %s or %s", AccessKeyFile, SecretKeyFile)
	}
	return nil
}
