package chunked

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

var f = Format{Prefix: "captf-test-", DataKey: "d", Label: "captf.io/test", ChunksAnnotation: "captf.io/test-chunks",
	DigestAnnotation: "captf.io/test-digest", ChunkBytes: 10, MaxChunks: 3}

func TestSplitJoin(t *testing.T) {
	for _, n := range []int{1, 10, 11, 30} {
		g := NewWithT(t)
		data := bytes.Repeat([]byte("x"), n)
		secrets, err := f.Split(data, "p", "ns", map[string]string{"k": "v"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(secrets).To(HaveLen((n + 9) / 10))
		for i, s := range secrets {
			g.Expect(s.Name).To(Equal(f.ChunkName("p", i)))
			g.Expect(s.Labels).To(Equal(map[string]string{"k": "v", "captf.io/test": "true"}))
		}
		g.Expect(strings.HasPrefix(secrets[0].Name, "captf-test-") && len(secrets[0].Name) == len("captf-test-")+20).To(BeTrue())
		got, err := f.Join("p", secrets)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(data))
	}
	_, err := f.Split(make([]byte, 31), "p", "ns", nil)
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("at most 30 fit 3 Secrets")))
}

func TestJoinRefuses(t *testing.T) {
	secrets, _ := f.Split([]byte("0123456789abcdefghij"), "p", "ns", nil)
	_, err := f.Join("q", secrets)
	NewWithT(t).Expect(errors.Is(err, ErrCorrupt)).To(BeTrue(), "another plan's chunks")
	secrets[1].Data["d"] = []byte("ABCDEFGHIJ")
	_, err = f.Join("p", secrets)
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("digest does not match")))
	_, _, err = f.Concat([][]byte{make([]byte, 11)})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("holds 11 bytes")))
}

func TestGunzipBounds(t *testing.T) {
	g := NewWithT(t)
	data, err := Gzip(func(w io.Writer) error { _, err := w.Write(make([]byte, 1000)); return err })
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := Gunzip(data, 1000)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raw).To(HaveLen(1000))
	_, err = Gunzip(data, 999)
	g.Expect(err).To(MatchError(ContainSubstring("more than 999 bytes")))
	_, err = Gunzip([]byte("not gzip"), 10)
	g.Expect(errors.Is(err, ErrCorrupt)).To(BeTrue())
}
