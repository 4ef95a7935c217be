package state

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
)

// canary is the value of the sensitive admin_password output in the captured fixtures: no
// error and no formatted Snapshot may ever show it.
const canary = "fixture-secret-value-do-not-leak"

func TestDecodeFixtures(t *testing.T) {
	single := decodeFixture(t, "single")
	tests := []struct {
		fixture string
		reason  string // "" when the state is readable
		message string // part of the error message
		check   func(g *WithT, s *Snapshot, f fixture)
	}{
		{fixture: "single", check: func(g *WithT, s *Snapshot, f fixture) {
			g.Expect(s.Serial).To(BeNumerically(">", 0))
			g.Expect(s.Lineage).To(HaveLen(36))
			g.Expect(s.TerraformVersion).To(Equal("1.12.6"))
			// network, node (count = 3) and zone (for_each over 2): each block once; the
			// terraform_remote_state data source is no managed resource.
			g.Expect(s.Resources).To(Equal(3))
			g.Expect(s.Outputs).To(HaveLen(6))
			g.Expect(s.Outputs).To(HaveKey("health"))
			g.Expect(s.Outputs["health"].Sensitive).To(BeTrue())
			g.Expect(string(s.Outputs["health"].Value)).To(MatchJSON(`{"state":"running","healthy":true,"message":"all nodes up"}`))
			g.Expect(string(s.Outputs["control_plane_endpoint"].Type)).To(ContainSubstring(`"object"`))
			g.Expect(s.Outputs["note"].Sensitive).To(BeFalse())
			g.Expect(s.Chunks).To(Equal([]string{contract.StateSecretName(f.Suffix)}))
			g.Expect(s.StaleChunks).To(BeEmpty())
			g.Expect(s.Bytes).To(BeEquivalentTo(len(f.Secrets[0].Data[contract.BackendStateKey])))
			g.Expect(s.Digest).To(HaveLen(64))
			g.Expect(s.InputsHash).To(BeEmpty())
			g.Expect(s.Labels).To(HaveKeyWithValue(contract.BackendWorkspaceLabel, "default"))
		}},
		{fixture: "relabeled", check: func(g *WithT, s *Snapshot, _ fixture) {
			g.Expect(s.Labels).To(HaveKeyWithValue(captfv1.ManagedLabel, "true"))
			g.Expect(s.Labels).To(HaveKeyWithValue(captfv1.OwnerKindLabel, captfv1.KindCluster))
			g.Expect(s.Labels).To(HaveKey("clusterctl.cluster.x-k8s.io/move"))
			g.Expect(s.Resources).To(Equal(3))
		}},
		{fixture: "locked", check: func(g *WithT, s *Snapshot, _ fixture) {
			g.Expect(s.Resources).To(Equal(3))
		}},
		{fixture: "chunked", check: func(g *WithT, s *Snapshot, f fixture) {
			g.Expect(s.Chunks).To(HaveLen(len(f.Secrets)))
			g.Expect(len(f.Secrets)).To(BeNumerically(">=", 2))
			g.Expect(s.Resources).To(Equal(1))
			g.Expect(s.Bytes).To(BeNumerically(">", 1<<20))
			g.Expect(s.DecompressedBytes).To(BeNumerically(">", s.Bytes))
		}},
		{fixture: "chunked-small", check: func(g *WithT, s *Snapshot, f fixture) {
			g.Expect(s.Chunks).To(HaveLen(len(f.Secrets)))
			g.Expect(len(s.Chunks)).To(BeNumerically(">=", 3))
			// The same compressed bytes as single, only cut differently.
			g.Expect(s.Digest).To(Equal(single.Digest))
			g.Expect(s.Serial).To(Equal(single.Serial))
		}},
		{fixture: "stale-trailing-chunk", check: func(g *WithT, s *Snapshot, f fixture) {
			g.Expect(s.Chunks).To(Equal([]string{contract.StateSecretName(f.Suffix)}))
			g.Expect(s.StaleChunks).To(Equal([]string{contract.StateSecretName(f.Suffix) + "-part-1"}))
			g.Expect(s.Digest).To(Equal(single.Digest))
			g.Expect(s.Bytes).To(Equal(single.Bytes))
		}},
		{fixture: "encrypted", reason: captfv1.StateEncryptedReason, message: "encrypted"},
		{fixture: "version3", reason: captfv1.StateCorruptReason, message: "state version 3 is not supported"},
		{fixture: "corrupt-gzip", reason: captfv1.StateCorruptReason, message: "do not decompress"},
		{fixture: "gzip-bomb", reason: captfv1.StateCorruptReason, message: "more than 64 MiB"},
		{fixture: "missing-chunk", reason: captfv1.StateInconsistentReason, message: "-part-1 is missing"},
		{fixture: "duplicated-chunk", reason: captfv1.StateInconsistentReason, message: "-part-1 appears twice"},
		{fixture: "foreign-name", reason: captfv1.StateInconsistentReason, message: "-old carries the backend's labels"},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.fixture] = true
		t.Run(tt.fixture, func(t *testing.T) {
			g := NewWithT(t)
			f := loadFixture(t, tt.fixture)
			// The API server lists in name order; the reader must not depend on any order.
			for _, perm := range [][]corev1.Secret{f.Secrets, shuffled(f.Secrets)} {
				s, err := Decode(perm, f.Suffix)
				if tt.reason != "" {
					g.Expect(err).To(HaveOccurred())
					g.Expect(Reason(err)).To(Equal(tt.reason))
					g.Expect(err.Error()).To(ContainSubstring(tt.message))
					g.Expect(err.Error()).To(HavePrefix("state: read " + contract.StateSecretName(f.Suffix) + ": "))
					g.Expect(err.Error()).NotTo(ContainSubstring(canary))
					g.Expect(s).To(BeNil())
					continue
				}
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(fmt.Sprintf("%v %+v %#v", s, s, s)).NotTo(ContainSubstring(canary))
				tt.check(g, s, f)
			}
		})
	}
	for _, name := range fixtureNames(t) {
		if !covered[name] {
			t.Errorf("fixture %s has no expectation in TestDecodeFixtures", name)
		}
	}
}

func TestErrorsMatchSentinels(t *testing.T) {
	g := NewWithT(t)
	_, err := Decode(nil, "abc-c")
	g.Expect(errors.Is(err, ErrNotFound)).To(BeTrue())
	g.Expect(errors.Is(err, ErrCorrupt)).To(BeFalse())
	g.Expect(errors.Is(fmt.Errorf("wrapped: %w", err), ErrNotFound)).To(BeTrue())
	g.Expect(Reason(err)).To(Equal(captfv1.StateNotFoundReason))
	g.Expect(Reason(errors.New("an API error"))).To(BeEmpty())
}

// TestDecode covers what the captured fixtures cannot show: hand-made documents at the edges of
// the format.
func TestDecode(t *testing.T) {
	const suffix = "0123456789abcdef-c"
	base := contract.StateSecretName(suffix)
	valid := `{"version":4,"terraform_version":"1.12.6","serial":7,"lineage":"l-1","outputs":{},"resources":[]}`
	tests := []struct {
		name    string
		secrets []corev1.Secret
		reason  string
		message string
		check   func(g *WithT, s *Snapshot)
	}{
		{name: "no Secrets", reason: captfv1.StateNotFoundReason, message: "the first apply creates it"},
		{name: "base without data", secrets: []corev1.Secret{secret(base, nil)}, reason: captfv1.StateNotFoundReason, message: "holds no state yet"},
		{name: "chunk without data", secrets: append(chunked(suffix, gzipped(valid), 2), secret(base+"-part-2", nil)),
			reason: captfv1.StateInconsistentReason, message: "-part-2 has no"},
		{name: "only chunks, no base", secrets: chunked(suffix, gzipped(valid), 3)[1:], reason: captfv1.StateInconsistentReason,
			message: base + " is missing"},
		{name: "leading zero is foreign", secrets: []corev1.Secret{secret(base, gzipped(valid)), secret(base+"-part-01", []byte("x"))},
			reason: captfv1.StateInconsistentReason, message: "-part-01 carries"},
		{name: "part-0 is foreign", secrets: []corev1.Secret{secret(base, gzipped(valid)), secret(base+"-part-0", []byte("x"))},
			reason: captfv1.StateInconsistentReason},
		{name: "another suffix is foreign", secrets: []corev1.Secret{secret(contract.StateSecretName("fedcba9876543210-c"), gzipped(valid))},
			reason: captfv1.StateInconsistentReason},
		{name: "33 chunks", secrets: chunked(suffix, gzipped(valid), 33), reason: captfv1.StateCorruptReason, message: "spans 33 Secrets"},
		{name: "32 chunks", secrets: chunked(suffix, gzipped(valid), 32), check: func(g *WithT, s *Snapshot) {
			g.Expect(s.Chunks).To(HaveLen(32))
		}},
		{name: "not gzip", secrets: []corev1.Secret{secret(base, []byte(valid))}, reason: captfv1.StateCorruptReason, message: "gzip"},
		{name: "truncated gzip", secrets: []corev1.Secret{secret(base, gzipped(valid)[:30])}, reason: captfv1.StateCorruptReason,
			message: "a chunk may be missing"},
		{name: "empty document", secrets: one(base, ""), reason: captfv1.StateCorruptReason, message: "ends in the middle"},
		{name: "not JSON", secrets: one(base, "hello"), reason: captfv1.StateCorruptReason, message: "not valid JSON (at byte 1)"},
		{name: "a list", secrets: one(base, "[]"), reason: captfv1.StateCorruptReason, message: "not a JSON object"},
		{name: "cut JSON", secrets: one(base, valid[:40]), reason: captfv1.StateCorruptReason, message: "ends in the middle"},
		{name: "trailing document", secrets: one(base, valid+valid), reason: captfv1.StateCorruptReason, message: "data after its JSON object"},
		{name: "trailing whitespace", secrets: one(base, valid+"\n\n"), check: func(g *WithT, s *Snapshot) {
			g.Expect(s.Serial).To(BeEquivalentTo(7))
		}},
		{name: "no version", secrets: one(base, `{"serial":1,"lineage":"x"}`), reason: captfv1.StateCorruptReason, message: `no "version" field`},
		{name: "version as string", secrets: one(base, `{"version":"4","serial":1,"lineage":"x"}`), reason: captfv1.StateCorruptReason,
			message: "version that is not a number is not supported"},
		{name: "version 5", secrets: one(base, `{"version":5,"serial":1,"lineage":"x"}`), reason: captfv1.StateCorruptReason, message: "version 5"},
		{name: "encrypted wins over the version", secrets: one(base, `{"version":3,"encryption_version":"v0"}`), reason: captfv1.StateEncryptedReason},
		{name: "encrypted wins over a shape error", secrets: one(base, `{"resources":{"a":1},"serial":"x","meta":{},"encrypted_data":"AAAA"}`),
			reason: captfv1.StateEncryptedReason},
		{name: "encryption field last", secrets: one(base, `{"serial":1,"lineage":"x","meta":{"key_provider.pbkdf2.k":"e30="},"encrypted_data":"AA==","encryption_version":"v0"}`),
			reason: captfv1.StateEncryptedReason},
		{name: "negative serial", secrets: one(base, `{"version":4,"serial":-1,"lineage":"x"}`), reason: captfv1.StateCorruptReason, message: "serial"},
		{name: "no lineage", secrets: one(base, `{"version":4,"serial":1}`), reason: captfv1.StateCorruptReason, message: "no lineage"},
		{name: "long lineage", secrets: one(base, `{"version":4,"serial":1,"lineage":"`+strings.Repeat("x", 200)+`"}`),
			reason: captfv1.StateCorruptReason, message: "longer than 128"},
		{name: "resources not a list", secrets: one(base, `{"version":4,"serial":1,"lineage":"x","resources":{"a":[1,{"b":2}]}}`),
			reason: captfv1.StateCorruptReason, message: `"resources" is not a list`},
		{name: "resource not an object", secrets: one(base, `{"version":4,"serial":1,"lineage":"x","resources":[1]}`),
			reason: captfv1.StateCorruptReason, message: "not a resource"},
		{name: "outputs of the wrong shape", secrets: one(base, `{"version":4,"serial":1,"lineage":"x","outputs":{"a":{"sensitive":"yes"}}}`),
			reason: captfv1.StateCorruptReason, message: `field "outputs.sensitive" has the wrong JSON type`},
		{name: "counts managed blocks only", secrets: one(base, `{"version":4,"serial":1,"lineage":"x","resources":[
			{"mode":"managed","type":"a","name":"a","instances":[{},{},{}]},
			{"mode":"data","type":"b","name":"b","instances":[{}]},
			{"mode":"managed","module":"module.m[0]","type":"a","name":"a","instances":[]},
			{"mode":"managed","module":"module.m[1]","type":"a","name":"a","instances":[{"attributes":{"x":[1,2,{"y":null}]}}]}]}`),
			check: func(g *WithT, s *Snapshot) { g.Expect(s.Resources).To(Equal(3)) }},
		{name: "unknown fields and null outputs", secrets: one(base, `{"version":4,"serial":0,"lineage":"x","check_results":[{"a":1}],"outputs":null,"future":{"x":[]}}`),
			check: func(g *WithT, s *Snapshot) {
				g.Expect(s.Outputs).To(BeEmpty())
				g.Expect(s.Outputs).NotTo(BeNil())
			}},
		{name: "output without value", secrets: one(base, `{"version":4,"serial":1,"lineage":"x","outputs":{"a":{"type":"string"}}}`),
			check: func(g *WithT, s *Snapshot) {
				g.Expect(s.Outputs["a"].IsNull()).To(BeTrue())
			}},
		{name: "two gzip members: the second is ignored", secrets: []corev1.Secret{secret(base, append(gzipped(valid), gzipped("garbage")...))},
			check: func(g *WithT, s *Snapshot) { g.Expect(s.Serial).To(BeEquivalentTo(7)) }},
		{name: "stale chunks after the stream", secrets: append(chunked(suffix, gzipped(valid), 2), secret(base+"-part-2", []byte("old")), secret(base+"-part-3", []byte("older"))),
			check: func(g *WithT, s *Snapshot) {
				g.Expect(s.Chunks).To(Equal([]string{base, base + "-part-1"}))
				g.Expect(s.StaleChunks).To(Equal([]string{base + "-part-2", base + "-part-3"}))
				g.Expect(s.Bytes).To(BeEquivalentTo(len(gzipped(valid))))
			}},
		{name: "exactly the size limit", secrets: one(base, padded(valid, MaxStateBytes)), check: func(g *WithT, s *Snapshot) {
			g.Expect(s.DecompressedBytes).To(BeEquivalentTo(MaxStateBytes))
		}},
		{name: "one byte over the size limit", secrets: one(base, padded(valid, MaxStateBytes+1)), reason: captfv1.StateCorruptReason, message: "more than 64 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s, err := Decode(tt.secrets, suffix)
			if tt.reason != "" {
				g.Expect(err).To(HaveOccurred())
				g.Expect(Reason(err)).To(Equal(tt.reason), err.Error())
				g.Expect(err.Error()).To(ContainSubstring(tt.message))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			tt.check(g, s)
		})
	}
}

func TestChunkIndex(t *testing.T) {
	const base = "tfstate-default-x-c"
	tests := []struct {
		name string
		want int
		ok   bool
	}{
		{base, 0, true},
		{base + "-part-1", 1, true},
		{base + "-part-31", 31, true},
		{base + "-part-999999999", 999999999, true},
		{base + "-part-1000000000", 0, false},
		{base + "-part-0", 0, false},
		{base + "-part-01", 0, false},
		{base + "-part--1", 0, false},
		{base + "-part-", 0, false},
		{base + "-part-1a", 0, false},
		{base + "x", 0, false},
		{"tfstate-default-y-c", 0, false},
	}
	for _, tt := range tests {
		i, ok := ChunkIndex(tt.name, base)
		if i != tt.want || ok != tt.ok {
			t.Errorf("ChunkIndex(%q) = %d, %t; want %d, %t", tt.name, i, ok, tt.want, tt.ok)
		}
		if ok && ChunkName(base, i) != tt.name {
			t.Errorf("ChunkName(%d) = %q, want %q", i, ChunkName(base, i), tt.name)
		}
	}
}

func TestOutputFormatting(t *testing.T) {
	g := NewWithT(t)
	o := Output{Value: []byte(`"` + canary + `"`), Sensitive: true}
	s := &Snapshot{Outputs: map[string]Output{"p": o}}
	for _, text := range []string{fmt.Sprint(o), fmt.Sprintf("%+v", o), fmt.Sprintf("%#v", o), fmt.Sprintf("%v", s), fmt.Sprintf("%+v", *s),
		fmt.Sprint(o.MarshalLog()), fmt.Sprint(s.MarshalLog())} {
		g.Expect(text).NotTo(ContainSubstring(canary))
	}
}

func decodeFixture(t *testing.T, name string) *Snapshot {
	t.Helper()
	f := loadFixture(t, name)
	s, err := Decode(f.Secrets, f.Suffix)
	if err != nil {
		t.Fatalf("decode fixture %s: %v", name, err)
	}
	return s
}

func secret(name string, data []byte) corev1.Secret {
	s := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	if data != nil {
		s.Data = map[string][]byte{contract.BackendStateKey: data}
	}
	return s
}

func one(base, doc string) []corev1.Secret { return []corev1.Secret{secret(base, gzipped(doc))} }

func gzipped(doc string) []byte {
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	_, _ = w.Write([]byte(doc))
	_ = w.Close()
	return b.Bytes()
}

// chunked cuts data into n chunks (the last ones may be a byte long) of suffix.
func chunked(suffix string, data []byte, n int) []corev1.Secret {
	base := contract.StateSecretName(suffix)
	size := max(1, len(data)/n)
	out := make([]corev1.Secret, n)
	for i := range n {
		end := min(len(data), size)
		if i == n-1 {
			end = len(data)
		}
		if end == 0 {
			end = 1 // an empty chunk would read as missing data; repeat a byte past the stream
			data = append(data, 0)
		}
		out[i] = secret(ChunkName(base, i), slices.Clone(data[:end]))
		data = data[end:]
	}
	return out
}

// padded grows a state document to size bytes with whitespace before its closing brace.
func padded(doc string, size int) string {
	return doc[:len(doc)-1] + strings.Repeat(" ", size-len(doc)) + "}"
}

func shuffled(in []corev1.Secret) []corev1.Secret {
	out := slices.Clone(in)
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
