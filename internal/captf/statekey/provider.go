package statekey

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Mode is what the runner asks of OpenTofu's state encryption.
type Mode string

const (
	// Encrypt writes the state encrypted and still reads a plain one (fallback), so turning
	// encryption on for an object with a state encrypts it at its next write.
	Encrypt Mode = "encrypt"
	// Decrypt writes the state plain and still reads an encrypted one (fallback): turning
	// encryption off.
	Decrypt Mode = "decrypt"
)

// ParseMode accepts "", encrypt and decrypt ("" is no encryption configuration at all).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "", Encrypt, Decrypt:
		return m, nil
	}
	return "", fmt.Errorf("%q is not encrypt or decrypt", s)
}

// Config is the OpenTofu encryption configuration (the TF_ENCRYPTION value) of a mode: the
// external key provider runs command, the state target uses AES-GCM with it, and the plain
// method is the fallback or the primary as the mode says. Plan files are left as they are.
func Config(mode Mode, command []string) (string, error) {
	if len(command) == 0 {
		return "", errors.New("statekey: the key provider needs a command")
	}
	quoted := make([]string, len(command))
	for i, c := range command {
		if strings.ContainsAny(c, "${}%") {
			return "", fmt.Errorf("statekey: the key provider's command argument %q has template characters", c)
		}
		quoted[i] = strconv.Quote(c)
	}
	primary, fallback := "method.aes_gcm."+MethodName, "method.unencrypted.plain"
	switch mode {
	case Encrypt:
	case Decrypt:
		primary, fallback = fallback, primary
	default:
		return "", fmt.Errorf("statekey: unknown mode %q", mode)
	}
	return fmt.Sprintf(`key_provider "external" %q {
  command = [%s]
}
method "aes_gcm" %q {
  keys = key_provider.external.%s
}
method "unencrypted" "plain" {}
state {
  method = %s
  fallback {
    method = %s
  }
}
`, ProviderName, strings.Join(quoted, ", "), MethodName, ProviderName, primary, fallback), nil
}

// Grant is the manager's answer to a runner: the key of one state.
type Grant struct {
	Namespace string `json:"namespace"`
	Suffix    string `json:"suffix"`
	Master    string `json:"master"`
	Key       []byte `json:"key"`
}

// Format keeps the key out of %v.
func (g Grant) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprintf(f, "{Grant %s/%s master %s}", g.Namespace, g.Suffix, g.Master)
}

// maxProviderInput bounds what the helper reads from OpenTofu: the stored metadata.
const maxProviderInput = 64 << 10

// Provide speaks OpenTofu's external key provider protocol (version 1) for one grant: it reads
// the metadata OpenTofu stored with the state (JSON null for a new encryption) from in, refuses
// metadata that names another state or master key (so the failure says why rather than
// "decryption failed"), and writes the header and the keys with this grant's metadata to out.
func Provide(g Grant, in io.Reader, out io.Writer) error {
	if len(g.Key) != KeyBytes {
		return fmt.Errorf("statekey: the manager's key has %d bytes, want %d", len(g.Key), KeyBytes)
	}
	raw, err := io.ReadAll(io.LimitReader(in, maxProviderInput+1))
	if err != nil {
		return fmt.Errorf("statekey: read the key provider input: %w", err)
	}
	if len(raw) > maxProviderInput {
		return errors.New("statekey: the key provider input is larger than 64 KiB")
	}
	if stored, err := parseProviderInput(raw); err != nil {
		return err
	} else if stored != nil {
		switch {
		case stored.Master != g.Master:
			return fmt.Errorf("%w: it was encrypted under master key %.16s, the manager holds %s; the manager needs the state-encryption Secret of the management cluster that wrote it", ErrOtherMaster, stored.Master, g.Master)
		case stored.Namespace != g.Namespace || stored.Suffix != g.Suffix:
			return fmt.Errorf("%w: it was encrypted for state %.64s in namespace %.63s, this Job's is %s in %s", ErrOtherState, stored.Suffix, stored.Namespace, g.Suffix, g.Namespace)
		}
	}
	meta := Meta{Version: metaVersion, Namespace: g.Namespace, Suffix: g.Suffix, Master: g.Master}
	header, _ := json.Marshal(map[string]any{"magic": "OpenTofu-External-Key-Provider", "version": 1})
	body, err := json.Marshal(map[string]any{
		"keys": map[string][]byte{"encryption_key": g.Key, "decryption_key": g.Key},
		"meta": providerMeta{ExternalData: &meta},
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n%s\n", header, body)
	return err
}

// parseProviderInput reads the metadata OpenTofu passes the provider: null, or the metadata the
// helper wrote before (nil when it carries none of ours).
func parseProviderInput(raw []byte) (*Meta, error) {
	var pm *providerMeta
	if err := json.Unmarshal(raw, &pm); err != nil {
		return nil, errors.New("statekey: the key provider input from OpenTofu is not JSON metadata")
	}
	if pm == nil || pm.ExternalData == nil {
		return nil, nil
	}
	if pm.ExternalData.Version != metaVersion {
		return nil, fmt.Errorf("statekey: the state's key metadata has version %.16q, not %s", pm.ExternalData.Version, metaVersion)
	}
	return pm.ExternalData, nil
}
