package statekey

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func master(t testing.TB, b byte) *Master {
	t.Helper()
	m, err := NewMaster(bytes.Repeat([]byte{b}, KeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestKeysDifferPerStateAndMaster(t *testing.T) {
	a, b := master(t, 1), master(t, 2)
	k := func(m *Master, ns, suffix string) string {
		key, err := m.Key(ns, suffix)
		if err != nil {
			t.Fatal(err)
		}
		if len(key) != KeyBytes {
			t.Fatalf("key has %d bytes", len(key))
		}
		return string(key)
	}
	base := k(a, "team-a", "0123456789abcdef-tc")
	if base != k(a, "team-a", "0123456789abcdef-tc") {
		t.Fatal("the same state's key differs between derivations")
	}
	for name, other := range map[string]string{
		"other suffix":    k(a, "team-a", "0123456789abcdef-tm"),
		"other namespace": k(a, "team-b", "0123456789abcdef-tc"),
		"other master":    k(b, "team-a", "0123456789abcdef-tc"),
		// the separator keeps "a"+"b/c" apart from "a/b"+"c"
		"shifted boundary": k(a, "team-a0123456789abcdef", "-tc"),
	} {
		if other == base {
			t.Errorf("%s: same key", name)
		}
	}
	if a.ID() == b.ID() || len(a.ID()) != 16 {
		t.Fatalf("master IDs %q and %q", a.ID(), b.ID())
	}
	if _, err := a.Key("", "x"); err == nil {
		t.Fatal("a key without a namespace was derived")
	}
	if _, err := NewMaster([]byte("short")); err == nil {
		t.Fatal("a short master key was accepted")
	}
}

func TestMasterNeverFormatsItsKey(t *testing.T) {
	m := master(t, 0x41)
	for _, s := range []string{fmtV(m), fmtV(*m), fmtV(Grant{Key: bytes.Repeat([]byte{0x41}, KeyBytes)})} {
		if strings.Contains(s, "AAAA") || strings.Contains(s, "65 65") || strings.Contains(s, "QUFB") {
			t.Errorf("formatted key material: %s", s)
		}
	}
}

func fmtV(v any) string {
	var b bytes.Buffer
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		b.WriteString(sprintf(verb, v))
	}
	return b.String()
}

// seal encrypts as OpenTofu's aes_gcm method does and wraps the result as its state encryption
// does, with the helper's metadata.
func seal(t testing.TB, m *Master, ns, suffix string, plain []byte, meta *Meta) []byte {
	t.Helper()
	key, err := m.Key(ns, suffix)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(block)
	nonce := make([]byte, gcm.NonceSize())
	_, _ = rand.Read(nonce)
	metaJSON, _ := json.Marshal(providerMeta{ExternalData: meta})
	var st struct {
		Serial  int64  `json:"serial"`
		Lineage string `json:"lineage"`
	}
	_ = json.Unmarshal(plain, &st)
	doc, _ := json.Marshal(map[string]any{
		"serial": st.Serial, "lineage": st.Lineage,
		"meta":               map[string][]byte{metaKey: metaJSON},
		"encrypted_data":     append(nonce, gcm.Seal(nil, nonce, plain, nil)...),
		"encryption_version": "v0",
	})
	return doc
}

func TestEnvelopeDecrypts(t *testing.T) {
	m := master(t, 7)
	const ns, suffix = "team-a", "0123456789abcdef-tc"
	plain := []byte(`{"version":4,"serial":3,"lineage":"l-1","outputs":{"secret":{"value":"hunter2"}}}`)
	own := &Meta{Version: metaVersion, Namespace: ns, Suffix: suffix, Master: m.ID()}
	doc := seal(t, m, ns, suffix, plain, own)
	if bytes.Contains(doc, []byte("hunter2")) || !IsEnvelope(doc) || IsEnvelope(plain) {
		t.Fatal("the envelope is not what OpenTofu writes")
	}
	env, err := ParseEnvelope(doc)
	if err != nil {
		t.Fatal(err)
	}
	if env.Serial == nil || *env.Serial != 3 || env.Lineage != "l-1" {
		t.Fatalf("clear serial/lineage: %v %q", env.Serial, env.Lineage)
	}
	got, err := env.Decrypt(m, ns, suffix)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("decrypt: %v %q", err, got)
	}

	cases := map[string]struct {
		doc        []byte
		m          *Master
		ns, suffix string
		want       error
		mentions   string
	}{
		"another master key":  {doc: doc, m: master(t, 8), ns: ns, suffix: suffix, want: ErrOtherMaster, mentions: m.ID()},
		"another state's key": {doc: doc, m: m, ns: ns, suffix: "fedcba9876543210-tc", want: ErrOtherState, mentions: suffix},
		"no metadata of ours": {doc: seal(t, m, ns, suffix, plain, nil), m: m, ns: ns, suffix: suffix, want: ErrForeign},
		"metadata lies about the master": {
			doc: seal(t, master(t, 9), ns, suffix, plain, own), m: m, ns: ns, suffix: suffix, want: ErrUndecryptable},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			env, err := ParseEnvelope(c.doc)
			if err != nil {
				if c.want == ErrForeign {
					return // refused at parse time is fine too
				}
				t.Fatal(err)
			}
			_, err = env.Decrypt(c.m, c.ns, c.suffix)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.mentions) {
				t.Fatalf("got %v, want %v mentioning %q", err, c.want, c.mentions)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatal("the error shows state contents")
			}
		})
	}
}

func TestParseEnvelopeRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"plain state":     `{"version":4,"serial":1,"lineage":"x"}`,
		"other version":   `{"encryption_version":"v9","encrypted_data":"AAAA"}`,
		"no data":         `{"encryption_version":"v0"}`,
		"data not base64": `{"encryption_version":"v0","encrypted_data":"!!"}`,
		"negative serial": `{"serial":-1,"encryption_version":"v0","encrypted_data":"AAAA"}`,
		"trailing data":   `{"encryption_version":"v0","encrypted_data":"AAAA"} {}`,
		"foreign meta":    `{"encryption_version":"v0","encrypted_data":"AAAA","meta":{"key_provider.external.captf":"bnVsbA=="}}`,
	} {
		if _, err := ParseEnvelope([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestProvideSpeaksTheExternalProtocol(t *testing.T) {
	m := master(t, 3)
	key, _ := m.Key("team-a", "s-tc")
	g := Grant{Namespace: "team-a", Suffix: "s-tc", Master: m.ID(), Key: key}
	var out bytes.Buffer
	if err := Provide(g, strings.NewReader("null"), &out); err != nil {
		t.Fatal(err)
	}
	header, body, ok := strings.Cut(out.String(), "\n")
	if !ok || header != `{"magic":"OpenTofu-External-Key-Provider","version":1}` {
		t.Fatalf("header %q", header)
	}
	var res struct {
		Keys struct {
			Enc []byte `json:"encryption_key"`
			Dec []byte `json:"decryption_key"`
		} `json:"keys"`
		Meta providerMeta `json:"meta"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Keys.Enc, key) || !bytes.Equal(res.Keys.Dec, key) || res.Meta.ExternalData.Suffix != "s-tc" {
		t.Fatalf("output %s", body)
	}
	// What OpenTofu hands back on decryption is the metadata written before: accepted.
	stored, _ := json.Marshal(res.Meta)
	if err := Provide(g, bytes.NewReader(stored), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	other := g
	other.Master = master(t, 4).ID()
	if err := Provide(other, bytes.NewReader(stored), &bytes.Buffer{}); !errors.Is(err, ErrOtherMaster) {
		t.Fatalf("another master: %v", err)
	}
	other = g
	other.Suffix = "t-tc"
	if err := Provide(other, bytes.NewReader(stored), &bytes.Buffer{}); !errors.Is(err, ErrOtherState) {
		t.Fatalf("another state: %v", err)
	}
	if err := Provide(g, strings.NewReader("{"), &bytes.Buffer{}); err == nil {
		t.Fatal("bad input accepted")
	}
}

func TestConfig(t *testing.T) {
	cfg, err := Config(Encrypt, []string{"/captf/bin/runner", "runner", "state-key", `--url=https://m:9444/v1/state-key`})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`command = ["/captf/bin/runner", "runner", "state-key", "--url=https://m:9444/v1/state-key"]`,
		"method = method.aes_gcm.captf\n  fallback {\n    method = method.unencrypted.plain"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	cfg, _ = Config(Decrypt, []string{"x"})
	if !strings.Contains(cfg, "method = method.unencrypted.plain\n  fallback {\n    method = method.aes_gcm.captf") {
		t.Errorf("decrypt config:\n%s", cfg)
	}
	if _, err := Config(Encrypt, []string{"${file(\"/etc/passwd\")}"}); err == nil {
		t.Error("template characters accepted")
	}
	if _, err := Config("", []string{"x"}); err == nil {
		t.Error("empty mode accepted")
	}
}
