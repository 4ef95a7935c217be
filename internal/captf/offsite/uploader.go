package offsite

import (
	"sync"
	"time"
)

// Retry bounds of an object whose upload failed: the first retry after RetryMin, doubling up
// to RetryMax.
const (
	RetryMin = 30 * time.Second
	RetryMax = 10 * time.Minute
	// Timeout bounds the uploads of one reconcile.
	Timeout = 60 * time.Second
)

// Uploader is the manager's offsite target: where copies go, the mounted credential (read
// again for every upload, so a rotated Secret is picked up), and which objects wait to retry.
type Uploader struct {
	Target         Target
	CredentialsDir string

	mu    sync.Mutex
	retry map[string]backoff
}

type backoff struct {
	next  time.Time
	delay time.Duration
	err   string
}

// NewUploader returns the uploader of --offsite-backup-url and its credentials directory.
func NewUploader(t Target, credentialsDir string) *Uploader {
	return &Uploader{Target: t, CredentialsDir: credentialsDir, retry: map[string]backoff{}}
}

// Store connects with the credential as it is now.
func (u *Uploader) Store() (*Store, error) {
	cred, err := ReadCredentials(u.CredentialsDir)
	if err != nil {
		return nil, err
	}
	return New(u.Target, cred)
}

// Wait is how long object (a key such as namespace/kind/name) waits before its next attempt
// after a failure; 0: try now.
func (u *Uploader) Wait(object string, now time.Time) time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	b, ok := u.retry[object]
	if !ok || !now.Before(b.next) {
		return 0
	}
	return b.next.Sub(now)
}

// Failed records a failed attempt and why, and returns the wait before the next.
func (u *Uploader) Failed(object string, now time.Time, err error) time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	b := u.retry[object]
	b.delay = min(max(2*b.delay, RetryMin), RetryMax)
	b.next = now.Add(b.delay)
	b.err = err.Error()
	u.retry[object] = b
	return b.delay
}

// LastError is why object's last attempt failed; empty when it has not failed since its last
// success.
func (u *Uploader) LastError(object string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.retry[object].err
}

// Succeeded forgets object's failures.
func (u *Uploader) Succeeded(object string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.retry, object)
}
