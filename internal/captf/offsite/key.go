// Package offsite keeps copies of CAPTF state backups off the cluster, in an S3-compatible
// bucket (a whitesky.cloud objectspace, or any S3 API): the manager uploads each complete backup
// set after it is taken, and `kubectl captf backups list --offsite` and `backups restore --from`
// read them back. A copy is the backup's compressed state bytes, verbatim, under a key the
// object's identity and the state's serial and digest make; its serial, lineage and digest are
// kept as object metadata and checked again on every read.
package offsite

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Suffix ends every copy's key: the gzip-compressed state JSON.
const Suffix = ".tfstate.gz"

// ErrBadKey: a key that is not one this package writes.
var ErrBadKey = errors.New("not an offsite backup key")

var digestRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Object names the CAPTF object a copy belongs to.
type Object struct {
	Namespace string
	Kind      string // captfv1.KindCluster, KindMachine or KindMachinePool
	Name      string
}

func (o Object) String() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

// validate refuses what could make a key reach another object's folder: the parts are
// Kubernetes names (no "/", no ".." of their own) and a known kind.
func (o Object) validate() error {
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		return fmt.Errorf("namespace %q: %s", o.Namespace, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(o.Name); len(msgs) > 0 {
		return fmt.Errorf("name %q: %s", o.Name, strings.Join(msgs, "; "))
	}
	switch o.Kind {
	case captfv1.KindCluster, captfv1.KindMachine, captfv1.KindMachinePool:
		return nil
	}
	return fmt.Errorf("kind %q is not a CAPTF kind", o.Kind)
}

// Folder is the key prefix of every copy of o: <prefix>/<namespace>/<kind>/<name>/.
func Folder(prefix string, o Object) string {
	p := strings.Trim(prefix, "/")
	if p != "" {
		p += "/"
	}
	return p + o.Namespace + "/" + o.Kind + "/" + o.Name + "/"
}

// Key is the key of the copy of serial with digest (hex SHA-256 of the compressed state) of o.
func Key(prefix string, o Object, serial int64, digest string) string {
	return Folder(prefix, o) + strconv.FormatInt(serial, 10) + "-" + digest + Suffix
}

// ParsedKey is what a key says.
type ParsedKey struct {
	Object Object
	Serial int64
	Digest string
}

// ParseKey reads a key under prefix; anything that Key would not have written is ErrBadKey.
// Keys come from a bucket listing or a user's flag, so nothing in them is trusted.
func ParseKey(prefix, key string) (ParsedKey, error) {
	bad := func(why string) (ParsedKey, error) {
		return ParsedKey{}, fmt.Errorf("offsite: key %q: %s: %w", key, why, ErrBadKey)
	}
	rest := key
	if p := strings.Trim(prefix, "/"); p != "" {
		var ok bool
		if rest, ok = strings.CutPrefix(key, p+"/"); !ok {
			return bad("not under the prefix " + p + "/")
		}
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 4 {
		return bad("want <namespace>/<kind>/<name>/<serial>-<sha256>" + Suffix + " under the prefix")
	}
	o := Object{Namespace: parts[0], Kind: parts[1], Name: parts[2]}
	if err := o.validate(); err != nil {
		return bad(err.Error())
	}
	file, ok := strings.CutSuffix(parts[3], Suffix)
	if !ok {
		return bad("the file name does not end in " + Suffix)
	}
	serialText, digest, ok := strings.Cut(file, "-")
	if !ok || !digestRE.MatchString(digest) {
		return bad("the file name is not <serial>-<sha256>" + Suffix)
	}
	serial, err := parseSerial(serialText)
	if err != nil {
		return bad(err.Error())
	}
	return ParsedKey{Object: o, Serial: serial, Digest: digest}, nil
}

// parseSerial reads a serial as strconv.FormatInt writes it: digits, no sign, no leading zero.
func parseSerial(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return 0, fmt.Errorf("serial %q is not a non-negative decimal number", s)
	}
	return n, nil
}
