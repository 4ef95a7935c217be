// Package statekey is the manager's key provider for OpenTofu's native state encryption.
//
// One master key, held by the manager in a Secret of its own namespace, derives the key of
// every state: HKDF-SHA256 over the namespace and the backend's secret_suffix, which derives
// from the object's namespace, kind and name (contract.StateSuffix) and not from its UID, so
// a key, like the state, survives clusterctl move and the adoption of a retained state. No
// per-object key is stored anywhere.
//
// The runner never sees the master key. At each OpenTofu command the runtime runs the runner's
// `state-key` helper (OpenTofu's external key provider), which fetches the one derived key of
// its state from the manager (Server) with the Pod's projected ServiceAccount token; the
// manager checks the token with a TokenReview and hands out only the key of the object whose
// Job runs the Pod. The manager decrypts states itself in memory (Envelope.Decrypt) to read
// outputs, serial and lineage; nothing here ever writes a plain state.
//
// docs/captf/state.md describes the format and docs/captf/security.md what each party sees.
package statekey

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// KeyBytes is the length of the master key and of every derived key (AES-256).
const KeyBytes = 32

// Master is the manager's master key.
type Master struct{ key []byte }

// NewMaster wraps a master key of KeyBytes bytes.
func NewMaster(key []byte) (*Master, error) {
	if len(key) != KeyBytes {
		return nil, fmt.Errorf("statekey: the master key has %d bytes, want %d", len(key), KeyBytes)
	}
	return &Master{key: append([]byte(nil), key...)}, nil
}

// Key derives the key of one state: the state Secrets of suffix in namespace.
func (m *Master) Key(namespace, suffix string) ([]byte, error) {
	if namespace == "" || suffix == "" {
		return nil, errors.New("statekey: a state key needs a namespace and a suffix")
	}
	return hkdf.Key(sha256.New, m.key, nil, "captf state key v1\x00"+namespace+"\x00"+suffix, KeyBytes)
}

// ID names the master key without revealing it: it is recorded in every encrypted state, so a
// state that does not decrypt says whether another master key encrypted it.
func (m Master) ID() string {
	id, err := hkdf.Key(sha256.New, m.key, nil, "captf state key id v1", 8)
	if err != nil {
		panic(err) // only for lengths hkdf cannot produce
	}
	return hex.EncodeToString(id)
}

// Format keeps the key out of %v and friends.
func (m Master) Format(f fmt.State, _ rune) { _, _ = fmt.Fprintf(f, "{Master %s}", m.ID()) }
