package offsite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// MaxBytes bounds a copy: a state's chunks together (32 Secrets of 1 MiB) fit well within it.
const MaxBytes = 40 << 20

// MaxListed bounds how many copies of one object List reads.
const MaxListed = 1000

// Errors of a store.
var (
	// ErrCollision: another object is under the key a copy needs (the bucket was written by
	// something else); it is never overwritten.
	ErrCollision = errors.New("another object exists under that key")
	// ErrIntegrity: a copy's bytes or metadata do not match what its key and metadata claim.
	ErrIntegrity = errors.New("the offsite copy does not hold what it claims")
	// ErrNotFound: no such copy.
	ErrNotFound = errors.New("no such offsite copy")
	// ErrAccess: the endpoint refused the credential.
	ErrAccess = errors.New("the object store refused the credential")
)

// Copy is one offsite copy: the facts kept as its metadata.
type Copy struct {
	// Key is the object's key in the bucket; Location is s3://bucket/key.
	Key      string
	Location string
	Object   Object
	Serial   int64
	Lineage  string
	// Digest is the hex SHA-256 of the compressed state bytes.
	Digest    string
	Resources int
	Bytes     int64
	// TakenAt is when the in-cluster backup was taken.
	TakenAt time.Time
	// InputsHash is the applied inputs hash the state carried.
	InputsHash string
}

// Store reads and writes copies in one Target.
type Store struct {
	t Target
	c *minio.Client
}

// New connects a Store (no request is made until the first call).
func New(t Target, cred Credentials) (*Store, error) {
	if err := cred.validate(); err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if len(cred.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cred.CABundle) {
			return nil, errors.New("offsite: the credential's " + CABundleFile + " holds no PEM certificate")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c, err := minio.New(t.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(cred.AccessKey, cred.SecretKey, ""),
		Secure:       !t.Insecure,
		Region:       t.Region,
		BucketLookup: minio.BucketLookupPath,
		Transport:    tr,
	})
	if err != nil {
		return nil, fmt.Errorf("offsite: %s: %w", t, err)
	}
	return &Store{t: t, c: c}, nil
}

// Target is the store's target.
func (s *Store) Target() Target { return s.t }

// Metadata names (x-amz-meta-captf-*).
const (
	metaFormat     = "Captf-Format"
	metaSerial     = "Captf-Serial"
	metaLineage    = "Captf-Lineage"
	metaDigest     = "Captf-Sha256"
	metaResources  = "Captf-Resources"
	metaTakenAt    = "Captf-Taken-At"
	metaInputsHash = "Captf-Inputs-Hash"
	formatV1       = "v1"
)

// Upload stores data, the compressed state bytes of a backup described by c (Object, Serial,
// Lineage, Digest, Resources, TakenAt, InputsHash), under its key, and returns the copy as
// stored. The digest is checked first. A copy with the same digest already there is success;
// anything else under the key is ErrCollision, and never overwritten (the write is
// conditional: If-None-Match: *).
func (s *Store) Upload(ctx context.Context, c Copy, data []byte) (Copy, error) {
	if err := c.Object.validate(); err != nil {
		return Copy{}, fmt.Errorf("offsite: upload: %w", err)
	}
	if got := digestOf(data); got != c.Digest {
		return Copy{}, fmt.Errorf("offsite: upload serial %d of %s: the data has digest %s, not %s: %w", c.Serial, c.Object, got, c.Digest, ErrIntegrity)
	}
	if len(data) > MaxBytes {
		return Copy{}, fmt.Errorf("offsite: upload serial %d of %s: %d bytes, over the %d a copy may have", c.Serial, c.Object, len(data), MaxBytes)
	}
	c.Key = Key(s.t.Prefix, c.Object, c.Serial, c.Digest)
	c.Location = s.t.Location(c.Key)
	c.Bytes = int64(len(data))
	if have, err := s.stat(ctx, c.Key); err == nil {
		return have, sameCopy(have, c)
	} else if !errors.Is(err, ErrNotFound) {
		return Copy{}, err
	}
	opts := minio.PutObjectOptions{
		ContentType: "application/gzip",
		UserMetadata: map[string]string{
			metaFormat: formatV1, metaSerial: strconv.FormatInt(c.Serial, 10), metaLineage: c.Lineage, metaDigest: c.Digest,
			metaResources: strconv.Itoa(c.Resources), metaTakenAt: c.TakenAt.UTC().Format(time.RFC3339Nano),
		},
		SendContentMd5: true,
	}
	if c.InputsHash != "" {
		opts.UserMetadata[metaInputsHash] = c.InputsHash
	}
	opts.SetMatchETagExcept("*")
	_, err := s.c.PutObject(ctx, s.t.Bucket, c.Key, bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		if minio.ToErrorResponse(err).StatusCode == http.StatusPreconditionFailed {
			// Written between the look and the write: by another manager replica or by
			// something else; the same copy is success.
			have, serr := s.stat(ctx, c.Key)
			if serr != nil {
				return Copy{}, serr
			}
			return have, sameCopy(have, c)
		}
		return Copy{}, s.wrap("upload "+c.Key, err)
	}
	return c, nil
}

// sameCopy: what is under the key is the copy to write (same digest, serial, lineage, size).
func sameCopy(have, want Copy) error {
	if have.Digest == want.Digest && have.Serial == want.Serial && have.Lineage == want.Lineage && have.Bytes == want.Bytes {
		return nil
	}
	return fmt.Errorf("offsite: %s holds serial %d, lineage %s, digest %s, %d bytes; this copy is serial %d, lineage %s, digest %s, %d bytes: %w",
		want.Location, have.Serial, have.Lineage, have.Digest, have.Bytes, want.Serial, want.Lineage, want.Digest, want.Bytes, ErrCollision)
}

// stat reads a copy's metadata and checks it against its key.
func (s *Store) stat(ctx context.Context, key string) (Copy, error) {
	info, err := s.c.StatObject(ctx, s.t.Bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return Copy{}, s.wrap("read "+key, err)
	}
	return s.copyOf(key, info.Size, info.UserMetadata)
}

// copyOf reads a copy's key and metadata; they must agree.
func (s *Store) copyOf(key string, size int64, meta map[string]string) (Copy, error) {
	pk, err := ParseKey(s.t.Prefix, key)
	if err != nil {
		return Copy{}, err
	}
	c, err := ParseMetadata(meta)
	if err != nil {
		return Copy{}, fmt.Errorf("offsite: %s: %w", s.t.Location(key), err)
	}
	c.Key, c.Location, c.Object, c.Bytes = key, s.t.Location(key), pk.Object, size
	if c.Serial != pk.Serial || c.Digest != pk.Digest {
		return Copy{}, fmt.Errorf("offsite: %s: its metadata says serial %d, digest %s; its key says serial %d, digest %s: %w",
			c.Location, c.Serial, c.Digest, pk.Serial, pk.Digest, ErrIntegrity)
	}
	return c, nil
}

// ParseMetadata reads a copy's user metadata (names without x-amz-meta-, any case). It comes
// from the bucket, so it is checked: a known format, a serial, a lineage, a SHA-256.
func ParseMetadata(meta map[string]string) (Copy, error) {
	get := func(name string) string {
		for k, v := range meta {
			if strings.EqualFold(k, name) {
				return v
			}
		}
		return ""
	}
	bad := func(format string, args ...any) (Copy, error) {
		return Copy{}, fmt.Errorf("metadata: "+format+": %w", append(args, ErrIntegrity)...)
	}
	if f := get(metaFormat); f != formatV1 {
		return bad("format %q, not %q: not written by CAPTF, or by a newer version", f, formatV1)
	}
	serial, err := parseSerial(get(metaSerial))
	if err != nil {
		return bad("%v", err)
	}
	c := Copy{Serial: serial, Lineage: get(metaLineage), Digest: get(metaDigest), InputsHash: get(metaInputsHash)}
	if c.Lineage == "" || len(c.Lineage) > 128 {
		return bad("no lineage, or one over 128 characters")
	}
	if !digestRE.MatchString(c.Digest) {
		return bad("the sha256 is not 64 lower-case hex digits")
	}
	if r := get(metaResources); r != "" {
		if c.Resources, err = strconv.Atoi(r); err != nil || c.Resources < 0 {
			return bad("resources %q is not a count", r)
		}
	}
	if t := get(metaTakenAt); t != "" {
		if c.TakenAt, err = time.Parse(time.RFC3339Nano, t); err != nil {
			return bad("taken-at %q is not an RFC 3339 time", t)
		}
	}
	return c, nil
}

// List lists o's copies, newest serial first (then newest taken). Keys that are not copies of o
// are skipped and counted in skipped.
func (s *Store) List(ctx context.Context, o Object) (copies []Copy, skipped int, err error) {
	if err := o.validate(); err != nil {
		return nil, 0, fmt.Errorf("offsite: list: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for info := range s.c.ListObjects(ctx, s.t.Bucket, minio.ListObjectsOptions{Prefix: Folder(s.t.Prefix, o), Recursive: true}) {
		if info.Err != nil {
			return nil, 0, s.wrap("list "+Folder(s.t.Prefix, o), info.Err)
		}
		if len(copies)+skipped == MaxListed {
			return nil, 0, fmt.Errorf("offsite: more than %d objects under %s; delete old copies", MaxListed, s.t.Location(Folder(s.t.Prefix, o)))
		}
		pk, err := ParseKey(s.t.Prefix, info.Key)
		if err != nil || pk.Object != o {
			skipped++
			continue
		}
		c, err := s.stat(ctx, info.Key)
		if err != nil {
			if errors.Is(err, ErrIntegrity) {
				skipped++
				continue
			}
			return nil, 0, err
		}
		copies = append(copies, c)
	}
	slices.SortFunc(copies, func(a, b Copy) int {
		if a.Serial != b.Serial {
			return int(min(max(b.Serial-a.Serial, -1), 1))
		}
		return b.TakenAt.Compare(a.TakenAt)
	})
	return copies, skipped, nil
}

// Download reads a copy: its metadata must agree with its key, and its bytes must have the
// digest both record (else ErrIntegrity). What the bytes decode to is the caller's to check
// (state.ImportBackup).
func (s *Store) Download(ctx context.Context, key string) (Copy, []byte, error) {
	c, err := s.stat(ctx, key)
	if err != nil {
		return Copy{}, nil, err
	}
	if c.Bytes > MaxBytes {
		return Copy{}, nil, fmt.Errorf("offsite: %s has %d bytes, over the %d a copy may have", c.Location, c.Bytes, MaxBytes)
	}
	obj, err := s.c.GetObject(ctx, s.t.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return Copy{}, nil, s.wrap("read "+key, err)
	}
	defer obj.Close()
	data, err := io.ReadAll(io.LimitReader(obj, MaxBytes+1))
	if err != nil {
		return Copy{}, nil, s.wrap("read "+key, err)
	}
	if got := digestOf(data); got != c.Digest || int64(len(data)) != c.Bytes {
		return Copy{}, nil, fmt.Errorf("offsite: %s: its %d bytes have digest %s, but it records %s (%d bytes): %w", c.Location, len(data), got, c.Digest, c.Bytes, ErrIntegrity)
	}
	return c, data, nil
}

// wrap turns the client's errors into ones that say what to do.
func (s *Store) wrap(what string, err error) error {
	r := minio.ToErrorResponse(err)
	switch {
	case r.Code == "NoSuchKey" || r.StatusCode == http.StatusNotFound && r.Code != "NoSuchBucket":
		return fmt.Errorf("offsite: %s in %s: %w", what, s.t, ErrNotFound)
	case r.Code == "NoSuchBucket":
		return fmt.Errorf("offsite: %s: bucket %q does not exist on %s; create it first", what, s.t.Bucket, s.t.Endpoint)
	case r.StatusCode == http.StatusForbidden || r.StatusCode == http.StatusUnauthorized ||
		r.Code == "InvalidAccessKeyId" || r.Code == "SignatureDoesNotMatch" || r.Code == "AccessDenied":
		return fmt.Errorf("offsite: %s in %s: %s (%s): check the access key, the secret key and the bucket's policy: %w", what, s.t, r.Code, r.Message, ErrAccess)
	}
	return fmt.Errorf("offsite: %s in %s: %w", what, s.t, err)
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
