package savedplan

import (
	"archive/zip"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/capx-io/capx/internal/captf/planhash"
)

// planFile builds a plan file of the shape OpenTofu writes, with the given prior state.
func planFile(t testing.TB, members map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, content := range members {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(content))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	noise := make([]byte, 3*MaxChunkBytes) // incompressible: several chunks
	_, _ = rand.Read(noise)
	for name, pf := range map[string][]byte{"small": []byte("PK tiny"), "chunked": noise} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			in := &Bundle{PlanFile: pf, Plan: []byte(`{"format_version":"1.2"}`)}
			secrets, err := Encode(in, "web-0123456789", "ns", map[string]string{"clusterctl.cluster.x-k8s.io/move": ""})
			g.Expect(err).NotTo(HaveOccurred())
			if name == "chunked" {
				g.Expect(len(secrets)).To(BeNumerically(">", 3))
			}
			for i, s := range secrets {
				g.Expect(s.Name).To(Equal(ChunkName("web-0123456789", i)))
				g.Expect(len(s.Data[DataKey])).To(BeNumerically("<=", MaxChunkBytes))
				g.Expect(s.Labels).To(HaveKeyWithValue(Label, "true"))
				g.Expect(s.Labels).To(HaveKey("clusterctl.cluster.x-k8s.io/move"), "moves with clusterctl")
				g.Expect(s.Type).To(Equal(corev1.SecretTypeOpaque))
			}
			out, digest, err := Decode("web-0123456789", secrets)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out.PlanFile).To(Equal(pf))
			g.Expect(string(out.Plan)).To(Equal(`{"format_version":"1.2"}`))
			g.Expect(digest).To(Equal(secrets[0].Annotations[DigestAnnotation]))
			g.Expect(out.PlanFileDigest()).To(HaveLen(64))
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	noise := make([]byte, 2*MaxChunkBytes)
	_, _ = rand.Read(noise)
	good := func() []*corev1.Secret {
		s, err := Encode(&Bundle{PlanFile: noise, Plan: []byte(`{}`)}, "p", "ns", nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for name, mutate := range map[string]func([]*corev1.Secret) []*corev1.Secret{
		"missing chunk":   func(s []*corev1.Secret) []*corev1.Secret { return s[:len(s)-1] },
		"changed chunk":   func(s []*corev1.Secret) []*corev1.Secret { s[1].Data[DataKey][0] ^= 1; return s },
		"other plan":      func(s []*corev1.Secret) []*corev1.Secret { s[1].Annotations[PlanAnnotation] = "q"; return s },
		"bad chunk count": func(s []*corev1.Secret) []*corev1.Secret { s[0].Annotations[ChunksAnnotation] = "99"; return s },
		"no Secrets":      func([]*corev1.Secret) []*corev1.Secret { return nil },
		"swapped chunks":  func(s []*corev1.Secret) []*corev1.Secret { s[1], s[2] = s[2], s[1]; return s },
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := Decode("p", mutate(good()))
			NewWithT(t).Expect(errors.Is(err, ErrCorrupt)).To(BeTrue(), "%v", err)
		})
	}
}

func TestEncodeRefusesTooLarge(t *testing.T) {
	noise := make([]byte, 3000)
	_, _ = rand.Read(noise)
	_, err := encode(&Bundle{PlanFile: noise, Plan: []byte(`{}`)}, "p", "ns", nil, 1000, 2)
	NewWithT(t).Expect(errors.Is(err, ErrTooLarge)).To(BeTrue(), "%v", err)
}

func TestEncodeRefusesPastTheBound(t *testing.T) {
	_, err := Encode(&Bundle{PlanFile: make([]byte, MaxBundleBytes), Plan: []byte(`{}`)}, "p", "ns", nil)
	NewWithT(t).Expect(errors.Is(err, ErrTooLarge)).To(BeTrue(), "%v", err)
}

func TestPriorState(t *testing.T) {
	g := NewWithT(t)
	p, err := PriorState(planFile(t, map[string]string{
		"tfplan":       "x",
		"tfstate":      `{"version":4,"serial":12,"lineage":"5b1a7c2e-aaaa","resources":[]}`,
		"tfstate-prev": `{"version":4,"serial":11,"lineage":"other"}`,
	}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(Prior{Lineage: "5b1a7c2e-aaaa", Serial: 12}))

	_, err = PriorState(planFile(t, map[string]string{"tfplan": "x"}))
	g.Expect(err).To(MatchError(ContainSubstring("no prior state")))
	_, err = PriorState([]byte("not a zip"))
	g.Expect(err).To(MatchError(ContainSubstring("not a plan")))
	_, err = PriorState(planFile(t, map[string]string{"tfstate": "{"}))
	g.Expect(err).To(HaveOccurred())
}

// FuzzDecodeChunks: any chunk data is refused or decoded, never a panic or an unbounded read;
// PriorState of whatever plan file comes out is refused or read.
func FuzzDecodeChunks(f *testing.F) {
	s, _ := Encode(&Bundle{PlanFile: []byte("PK"), Plan: []byte(`{"a":1}`)}, "p", "ns", nil)
	f.Add(s[0].Data[DataKey])
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, digest, err := DecodeChunks([][]byte{data})
		if err != nil {
			return
		}
		if len(digest) != 64 || len(b.PlanFile) == 0 {
			t.Fatalf("decoded %q with digest %q", b.PlanFile, digest)
		}
		_, _ = PriorState(b.PlanFile)
	})
}

// FuzzPriorState: any plan file is refused or read, never a panic.
func FuzzPriorState(f *testing.F) {
	f.Add(planFile(f, map[string]string{"tfstate": `{"serial":1,"lineage":"x"}`}))
	f.Add([]byte("PK\x03\x04"))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = PriorState(b) })
}

// bigPlan is a plan JSON of n resource creates with a few attributes each, and a plan file
// (a zip with a prior state of n resources) of the shape OpenTofu writes.
func bigPlan(b testing.TB, n int) *Bundle {
	b.Helper()
	var changes []string
	var resources []string
	for i := range n {
		addr := fmt.Sprintf(`"module.role.terraform_data.node[%d]"`, i)
		changes = append(changes, `{"address":`+addr+`,"mode":"managed","type":"terraform_data","name":"node","index":`+strconv.Itoa(i)+
			`,"change":{"actions":["create"],"before":null,"after":{"input":{"name":"node-`+strconv.Itoa(i)+`","size":"large","zone":"fd-a"}},"after_unknown":{"id":true,"output":true},"after_sensitive":{}}}`)
		resources = append(resources, `{"mode":"managed","type":"terraform_data","name":"old`+strconv.Itoa(i)+`","instances":[{"attributes":{"id":"x"}}]}`)
	}
	doc := `{"format_version":"1.2","resource_changes":[` + strings.Join(changes, ",") + `]}`
	state := `{"version":4,"serial":41,"lineage":"5b1a7c2e-aaaa","resources":[` + strings.Join(resources, ",") + `]}`
	return &Bundle{PlanFile: planFile(b, map[string]string{"tfplan": "x", "tfstate": state}), Plan: []byte(doc)}
}

// BenchmarkManagerHash is what the manager does with a saved plan when it records the plan and
// again before its approved apply: decode the Secrets, read the prior state from the plan file,
// parse the plan and hash it; for 2,000 changes, and for a bundle just under MaxBundleBytes
// (what one decode may cost the manager at most, B/op).
func BenchmarkManagerHash(b *testing.B) {
	for _, n := range []int{2000, 18000} {
		b.Run(strconv.Itoa(n)+"-changes", func(b *testing.B) {
			bundle := bigPlan(b, n)
			secrets, err := Encode(bundle, "p", "ns", nil)
			if err != nil {
				b.Fatal(err)
			}
			key := make([]byte, 32)
			b.ResetTimer()
			for range b.N {
				bundle, _, err := Decode("p", secrets)
				if err != nil {
					b.Fatal(err)
				}
				plan, err := bundle.ParsePlan()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := bundle.Hash(key, plan, "h2:x", ""); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(secrets)), "secrets")
			b.ReportMetric(float64(len(bundle.Plan)+len(bundle.PlanFile)), "bundle-bytes")
		})
	}
}

func TestHashBindsThePriorState(t *testing.T) {
	g := NewWithT(t)
	key := make([]byte, 32)
	b := bigPlan(t, 3)
	plan, err := b.ParsePlan()
	g.Expect(err).NotTo(HaveOccurred())
	h, err := b.Hash(key, plan, "h2:x", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plan.ResourceChanges).To(HaveLen(3))
	want, err := planhash.Fingerprint(key, plan, planhash.Binding{Lineage: "5b1a7c2e-aaaa", Serial: 41, InputsHash: "h2:x", PlanFile: b.PlanFileDigest()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h).To(Equal(want))
	other, err := b.Hash(key, plan, "h2:y", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other).NotTo(Equal(h), "the inputs hash is bound")
	viewed, err := b.Hash(key, plan, "h2:x", strings.Repeat("ab", 32))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(viewed).NotTo(Equal(h), "the view digest is bound")
	_, err = (&Bundle{PlanFile: []byte("no zip"), Plan: b.Plan}).Hash(key, plan, "h2:x", "")
	g.Expect(err).To(HaveOccurred(), "a plan file without a prior state has no hash")
}
