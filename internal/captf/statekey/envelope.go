package statekey

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/json"
	"errors"
	"fmt"
)

// Names in the encryption configuration the runner gives OpenTofu (TF_ENCRYPTION). OpenTofu
// records the key provider's metadata under "key_provider.<type>.<name>".
const (
	ProviderName = "captf"
	MethodName   = "captf"
	metaKey      = "key_provider.external." + ProviderName
	// envelopeVersion is the only encryption_version OpenTofu writes (and reads).
	envelopeVersion = "v0"
	// metaVersion marks the metadata the helper writes.
	metaVersion = "v1"
)

// Meta is what the helper records in an encrypted state next to the ciphertext (in the clear):
// which state's key and which master key encrypted it. It holds no key material.
type Meta struct {
	Version   string `json:"captf"`
	Namespace string `json:"namespace"`
	Suffix    string `json:"suffix"`
	// Master is the master key's ID (Master.ID).
	Master string `json:"master"`
}

// providerMeta is OpenTofu's external key provider metadata (its MetadataV1).
type providerMeta struct {
	ExternalData *Meta `json:"external_data"`
}

// Envelope is OpenTofu's encrypted state document: serial and lineage stay in the clear, the
// state JSON is AES-GCM ciphertext (nonce first) in encrypted_data.
type Envelope struct {
	// Serial and Lineage are the clear copies OpenTofu keeps of the encrypted state's own.
	Serial  *int64
	Lineage string
	// Meta is the helper's metadata; nil when the state was encrypted by another key provider.
	Meta *Meta
	data []byte
}

// Errors of Decrypt, for errors.Is; the returned errors say what to do.
var (
	// ErrNotEnvelope: the data is not an encrypted state (no encryption_version).
	ErrNotEnvelope = errors.New("not an encrypted state")
	// ErrForeign: the state was encrypted by a key provider other than the manager's.
	ErrForeign = errors.New("the state is encrypted with a key the manager does not hold")
	// ErrOtherMaster: the state was encrypted under another master key.
	ErrOtherMaster = errors.New("the state was encrypted under another master key")
	// ErrOtherState: the state was encrypted with another state's key (copied from elsewhere).
	ErrOtherState = errors.New("the state was encrypted with the key of another state")
	// ErrUndecryptable: the ciphertext does not open with the key (damaged or a wrong key).
	ErrUndecryptable = errors.New("the state does not decrypt")
)

// IsEnvelope reports whether a decompressed state document is OpenTofu's encrypted form, by
// the same sign OpenTofu uses (a non-empty encryption_version). It does not parse the rest.
func IsEnvelope(doc []byte) bool {
	var probe struct {
		Version string `json:"encryption_version"`
	}
	return json.Unmarshal(doc, &probe) == nil && probe.Version != ""
}

// ParseEnvelope reads an encrypted state document. Its errors name fields, never contents.
func ParseEnvelope(doc []byte) (*Envelope, error) {
	var raw struct {
		Serial  *int64            `json:"serial"`
		Lineage string            `json:"lineage"`
		Meta    map[string][]byte `json:"meta"`
		Data    []byte            `json:"encrypted_data"`
		Version string            `json:"encryption_version"`
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&raw); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, fmt.Errorf("statekey: encrypted state: field %q has the wrong JSON type", typeErr.Field)
		}
		return nil, errors.New("statekey: encrypted state: not a JSON object with base64 fields")
	}
	if dec.More() {
		return nil, errors.New("statekey: encrypted state: data after the JSON object")
	}
	switch {
	case raw.Version == "":
		return nil, ErrNotEnvelope
	case raw.Version != envelopeVersion:
		return nil, fmt.Errorf("statekey: encrypted state: encryption_version %.16q is not %s, the one OpenTofu writes", raw.Version, envelopeVersion)
	case len(raw.Data) == 0:
		return nil, errors.New("statekey: encrypted state: encrypted_data is empty")
	case raw.Serial != nil && *raw.Serial < 0:
		return nil, errors.New("statekey: encrypted state: serial is negative")
	}
	e := &Envelope{Serial: raw.Serial, Lineage: raw.Lineage, data: raw.Data}
	if m, ok := raw.Meta[metaKey]; ok {
		var pm providerMeta
		if err := json.Unmarshal(m, &pm); err != nil || pm.ExternalData == nil || pm.ExternalData.Version != metaVersion {
			return nil, fmt.Errorf("statekey: encrypted state: the metadata of key provider %s is not the manager's", metaKey)
		}
		e.Meta = pm.ExternalData
	}
	return e, nil
}

// Decrypt returns the plain state JSON of the state of suffix in namespace, in memory only.
// The errors wrap the sentinels above and say what to do.
func (e *Envelope) Decrypt(m *Master, namespace, suffix string) ([]byte, error) {
	switch {
	case e.Meta == nil:
		return nil, fmt.Errorf("%w: it names no %s key provider metadata (was it encrypted by the module's own encryption block, or another tool?); restore a backup the manager encrypted", ErrForeign, metaKey)
	case e.Meta.Master != m.ID():
		return nil, fmt.Errorf("%w: it was encrypted under master key %.16s and this manager holds %s; give this manager the state-encryption Secret of the management cluster that wrote it (docs/captf/state.md, clusterctl move)", ErrOtherMaster, e.Meta.Master, m.ID())
	case e.Meta.Namespace != namespace || e.Meta.Suffix != suffix:
		return nil, fmt.Errorf("%w: it was encrypted for state %.64s in namespace %.63s; restore a backup of this object's own state", ErrOtherState, e.Meta.Suffix, e.Meta.Namespace)
	}
	key, err := m.Key(namespace, suffix)
	if err != nil {
		return nil, err
	}
	plain, err := Open(key, e.data)
	if err != nil {
		return nil, fmt.Errorf("%w with this manager's key for it: the ciphertext is damaged; restore a backup", ErrUndecryptable)
	}
	return plain, nil
}

// OpenGrant decrypts the envelope with the key of a grant (what a runner holds), refusing an
// envelope whose metadata names another state or master key.
func (e *Envelope) OpenGrant(g Grant) ([]byte, error) {
	switch {
	case e.Meta == nil:
		return nil, fmt.Errorf("%w: it names no %s key provider metadata", ErrForeign, metaKey)
	case e.Meta.Master != g.Master:
		return nil, fmt.Errorf("%w: it was encrypted under master key %.16s, the manager holds %s", ErrOtherMaster, e.Meta.Master, g.Master)
	case e.Meta.Namespace != g.Namespace || e.Meta.Suffix != g.Suffix:
		return nil, fmt.Errorf("%w: it was encrypted for state %.64s in namespace %.63s, this Job's is %s in %s", ErrOtherState, e.Meta.Suffix, e.Meta.Namespace, g.Suffix, g.Namespace)
	}
	plain, err := Open(g.Key, e.data)
	if err != nil {
		return nil, fmt.Errorf("%w: the ciphertext is damaged; restore another backup", ErrUndecryptable)
	}
	return plain, nil
}

// Open decrypts what OpenTofu's aes_gcm method sealed: a 12-byte nonce, then the ciphertext
// and tag, with no additional data.
func Open(key, sealed []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	if len(sealed) < gcm.NonceSize()+gcm.Overhead() {
		return nil, ErrUndecryptable
	}
	return gcm.Open(nil, sealed[:gcm.NonceSize()], sealed[gcm.NonceSize():], nil)
}
