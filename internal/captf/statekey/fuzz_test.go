package statekey

import (
	"bytes"
	"fmt"
	"testing"
)

func sprintf(format string, v any) string { return fmt.Sprintf(format, v) }

// FuzzParseEnvelope: anyone who can write the state Secrets writes what the manager parses and
// decrypts. It never panics, and a decrypt with the wrong state's key never succeeds.
func FuzzParseEnvelope(f *testing.F) {
	m := master(f, 5)
	f.Add(seal(f, m, "ns", "s-tc", []byte(`{"version":4,"serial":1,"lineage":"x"}`),
		&Meta{Version: metaVersion, Namespace: "ns", Suffix: "s-tc", Master: m.ID()}))
	f.Add([]byte(`{"encryption_version":"v0","encrypted_data":"AAAA","meta":{}}`))
	f.Add([]byte(`{"serial":1e99,"encryption_version":"v0"}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		env, err := ParseEnvelope(doc)
		if err != nil {
			return
		}
		if _, err := env.Decrypt(m, "ns", "other-tc"); err == nil {
			t.Fatal("decrypted with another state's key")
		}
		_, _ = env.Decrypt(m, "ns", "s-tc")
	})
}

// FuzzProvideInput: the metadata OpenTofu hands the helper comes from the state Secret.
func FuzzProvideInput(f *testing.F) {
	m := master(f, 6)
	key, _ := m.Key("ns", "s-tc")
	g := Grant{Namespace: "ns", Suffix: "s-tc", Master: m.ID(), Key: key}
	f.Add([]byte("null"))
	f.Add([]byte(`{"external_data":{"captf":"v1","namespace":"ns","suffix":"s-tc","master":"` + m.ID() + `"}}`))
	f.Add([]byte(`{"external_data":{"captf":"v2"}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		if err := Provide(g, bytes.NewReader(in), &out); err != nil && out.Len() > 0 {
			t.Fatal("wrote keys and failed")
		}
	})
}
