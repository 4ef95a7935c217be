package sriov

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Store keeps the attachments on the node's disk, so that an agent restarted between a Pod's
// ADD and DEL still knows which NIC to detach.
type Store struct {
	Dir string
}

func (s Store) path(k AttachmentKey) string {
	h := sha256.Sum256([]byte(k.ContainerID + "\x00" + k.IfName))
	return filepath.Join(s.Dir, hex.EncodeToString(h[:16])+".json")
}

// Get returns the attachment, or nil when there is none.
func (s Store) Get(k AttachmentKey) (*Attachment, error) {
	b, err := os.ReadFile(s.path(k))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var a Attachment
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("attachment record %s is corrupt: %w", s.path(k), err)
	}
	if a.AttachmentKey != k {
		return nil, fmt.Errorf("attachment record %s belongs to %s/%s", s.path(k), a.ContainerID, a.IfName)
	}
	return &a, nil
}

// Put records an attachment (written to a temporary file and renamed, so a crash leaves the
// old record or the new one).
func (s Store) Put(a Attachment) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	tmp := s.path(a.AttachmentKey) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.path(a.AttachmentKey))
}

// Delete forgets an attachment; forgetting one that is not there is no error.
func (s Store) Delete(k AttachmentKey) error {
	err := os.Remove(s.path(k))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
