package state

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
)

// maxSeed keeps large fixtures (chunked, gzip-bomb) out of the seed corpus: the fuzzer would
// spend its time decompressing them, and TestDecodeFixtures covers them.
const maxSeed = 64 << 10

// FuzzDecode feeds Decode arbitrary state Secrets. The input is either compressed data as
// stored, or (compressed false) a document the harness compresses, so that mutations reach the
// JSON reader instead of failing at the gzip header; parts cuts it into that many chunks (the
// last ones may be empty), and names spoils one chunk's name.
//
//	go test ./internal/captf/state -run '^$' -fuzz FuzzDecode -fuzztime 5m -fuzzminimizetime 10x
//
// (-fuzzminimizetime keeps the coordinator from spending a minute minimizing each new input
// on a busy machine.)
func FuzzDecode(f *testing.F) {
	for _, name := range fixtureNames(f) {
		fx := loadFixture(f, name)
		var data []byte
		for _, s := range fx.Secrets {
			data = append(data, s.Data[contract.BackendStateKey]...)
		}
		if len(data) > maxSeed {
			continue
		}
		f.Add(data, true, uint8(len(fx.Secrets)), uint8(0))
		if plain, err := io.ReadAll(io.LimitReader(mustGzipReader(data), maxSeed+1)); err == nil && len(plain) <= maxSeed {
			f.Add(plain, false, uint8(1), uint8(0))
			f.Add(plain, false, uint8(3), uint8(2))
		}
	}
	f.Add([]byte(`{"version":4,"serial":1,"lineage":"x","resources":[{"mode":"managed"}],"outputs":{"a":{"value":1}}}`), false, uint8(2), uint8(0))
	f.Add([]byte(`{"encryption_version":"v0","version":3}`), false, uint8(1), uint8(0))

	const suffix = "fuzz0123456789ab-c"
	base := contract.StateSecretName(suffix)
	f.Fuzz(func(t *testing.T, data []byte, compressed bool, parts, names uint8) {
		if !compressed {
			var b bytes.Buffer
			w, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
			_, _ = w.Write(data)
			_ = w.Close()
			data = b.Bytes()
		}
		n := int(parts%40) + 1
		secrets := make([]corev1.Secret, n)
		size := (len(data) + n - 1) / n
		for i := range secrets {
			k := min(size, len(data))
			secrets[i] = secret(ChunkName(base, i), data[:k:k])
			data = data[k:]
		}
		if names != 0 {
			i := int(names) % n
			secrets[i].Name = []string{base + "-part-0", base + "x", ChunkName(base, i+1), base}[int(names/40)%4]
		}
		before := make([][]byte, n)
		for i, s := range secrets {
			before[i] = slices.Clone(s.Data[contract.BackendStateKey])
		}

		s, err := Decode(secrets, suffix)

		for i, s := range secrets {
			if !bytes.Equal(before[i], s.Data[contract.BackendStateKey]) {
				t.Fatalf("Decode modified chunk %d", i)
			}
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a *state.Error", err)
			}
			switch e.Reason {
			case captfv1.StateNotFoundReason, captfv1.StateEncryptedReason, captfv1.StateCorruptReason, captfv1.StateInconsistentReason:
			default:
				t.Fatalf("unknown reason %q", e.Reason)
			}
			if s != nil {
				t.Fatal("a Snapshot with an error")
			}
			return
		}
		if s.Serial < 0 || s.Lineage == "" || s.Resources < 0 || len(s.Chunks) == 0 || len(s.Chunks)+len(s.StaleChunks) != n {
			t.Fatalf("implausible snapshot: %+v", s.MarshalLog())
		}
		if s.DecompressedBytes > MaxStateBytes || s.Bytes <= 0 || len(s.Digest) != 64 || s.Outputs == nil {
			t.Fatalf("implausible snapshot: %+v", s.MarshalLog())
		}
	})
}

func mustGzipReader(data []byte) io.Reader {
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return bytes.NewReader(nil)
	}
	return r
}
