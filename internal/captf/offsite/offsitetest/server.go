// Package offsitetest runs a real S3-compatible server for tests: gofakes3
// (github.com/johannesboyne/gofakes3, in-memory backend) over HTTP on loopback, in process.
//
// gofakes3 does not check request signatures. The server here refuses every request whose
// SigV4 Authorization header does not name the test access key (403 InvalidAccessKeyId, as
// S3 answers), so a wrong credential fails the way it does against a real endpoint; a right
// access key with a wrong secret key is not detected.
package offsitetest

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/capx-io/capx/internal/captf/offsite"
)

// The test credential and bucket.
const (
	AccessKey = "captf-test-access"
	SecretKey = "captf-test-secret-key"
	Bucket    = "captf-backups"
)

// Server is a running S3-compatible server with one bucket.
type Server struct {
	// URL is http://127.0.0.1:port: the endpoint.
	URL     string
	Backend *s3mem.Backend
	// Requests counts the requests served (after the credential check).
	Requests func() int
}

var credentialRE = regexp.MustCompile(`Credential=([^/,\s]+)/`)

// Start starts a server with Bucket; it stops with the test.
func Start(t testing.TB) *Server {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(Bucket); err != nil {
		t.Fatal(err)
	}
	faker := gofakes3.New(backend, gofakes3.WithAutoBucket(false))
	inner := faker.Server()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := credentialRE.FindStringSubmatch(r.Header.Get("Authorization"))
		if m == nil || m[1] != AccessKey {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidAccessKeyId</Code>` +
				`<Message>The AWS Access Key Id you provided does not exist in our records.</Message></Error>`))
			return
		}
		n.Add(1)
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return &Server{URL: srv.URL, Backend: backend, Requests: func() int { return int(n.Load()) }}
}

// TargetURL is the --offsite-backup-url of the bucket with prefix.
func (s *Server) TargetURL(prefix string) string {
	u := s.URL + "/" + Bucket
	if prefix != "" {
		u += "/" + prefix
	}
	return u
}

// Target is TargetURL parsed.
func (s *Server) Target(t testing.TB, prefix string) offsite.Target {
	t.Helper()
	tg, err := offsite.ParseURL(s.TargetURL(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// Credentials are the test credential.
func Credentials() offsite.Credentials {
	return offsite.Credentials{AccessKey: AccessKey, SecretKey: SecretKey}
}

// Store connects to the bucket with prefix.
func (s *Server) Store(t testing.TB, prefix string) *offsite.Store {
	t.Helper()
	st, err := offsite.New(s.Target(t, prefix), Credentials())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Put writes an object through the S3 API with its own client, as something other than CAPTF
// might (unconditionally, with meta as x-amz-meta-*): for tests of what the store refuses to
// trust.
func (s *Server) Put(t testing.TB, key string, meta map[string]string, data []byte) {
	t.Helper()
	c, err := minio.New(strings.TrimPrefix(s.URL, "http://"), &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(context.Background(), Bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{UserMetadata: meta}); err != nil {
		t.Fatal(err)
	}
}

// WriteCredentials writes the test credential as a mounted credentials Secret would be, into
// dir, and returns dir.
func WriteCredentials(t testing.TB, dir string) string {
	t.Helper()
	for name, v := range map[string]string{offsite.AccessKeyFile: AccessKey, offsite.SecretKeyFile: SecretKey} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
