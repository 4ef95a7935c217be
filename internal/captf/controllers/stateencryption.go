package controllers

import (
	"fmt"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/jobs"
	"github.com/capx-io/capx/internal/captf/statekey"
)

// StateEncryption is the manager's key provider for OpenTofu's state encryption (package
// statekey): the master key its reads decrypt with, and the endpoint its Jobs fetch their state
// key from. nil in EngineOptions: the manager holds no key, every state is read and written
// plain, and an object that asks for encryption is refused before its Job starts.
type StateEncryption struct {
	Master *statekey.Master
	// URL is the endpoint as runners reach it (https://<service>/v1/state-key).
	URL string
	// CAPEM is the endpoint's certificate, as PEM (public): runners trust only it.
	CAPEM string
}

// master is the key the manager reads states and backups with; nil without encryption.
func (e *StateEncryption) master() *statekey.Master {
	if e == nil {
		return nil
	}
	return e.Master
}

// jobEncryption decides how an object's Job stores its state: as its spec.stateEncryption
// says; without one, plain, unless its state is still encrypted (encrypted says so), which a
// Job then reads and writes plain (decrypt), so removing the field turns encryption off at the
// next write. It is an error for an object to need a key while the manager holds none.
func jobEncryption(spec *captfv1.StateEncryption, encrypted bool, se *StateEncryption) (*jobs.StateEncryption, error) {
	mode := statekey.Decrypt
	switch {
	case spec == nil && !encrypted:
		return nil, nil
	case spec == nil:
	case spec.Mode == captfv1.StateEncryptionEncrypt:
		mode = statekey.Encrypt
	case spec.Mode == captfv1.StateEncryptionDecrypt:
	default:
		return nil, fmt.Errorf("spec.stateEncryption.mode %q: want %s or %s", spec.Mode, captfv1.StateEncryptionEncrypt, captfv1.StateEncryptionDecrypt)
	}
	if se == nil {
		return nil, fmt.Errorf("the object's state is encrypted or asks to be (spec.stateEncryption), but the manager runs without --state-encryption: " +
			"start the manager with --state-encryption (and the master key Secret its state was encrypted under), or remove spec.stateEncryption from an object whose state is plain")
	}
	return &jobs.StateEncryption{Mode: string(mode), URL: se.URL, CAPEM: se.CAPEM}, nil
}
