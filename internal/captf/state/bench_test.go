package state

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/capx-io/capx/internal/captf/contract"
)

// syntheticState writes a version 4 state of about size bytes in OpenTofu's compact form:
// terraform_data resources of about 2 KiB, each with some random hex (which does not
// compress) among repeated structure, so it compresses about as well as real states do, and
// the cluster role's outputs.
func syntheticState(size int) []byte {
	r := rand.New(rand.NewPCG(4, 2))
	random := func(n int) string {
		b := make([]byte, n/2)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return hex.EncodeToString(b)
	}
	var b bytes.Buffer
	b.Grow(size + 4096)
	b.WriteString(`{"version":4,"terraform_version":"1.12.6","serial":42,"lineage":"6bef47dd-6ec4-277b-bfca-bc8e65a9987a","outputs":{` +
		`"health":{"value":{"healthy":true,"message":"all nodes up","state":"running"},"type":["object",{"healthy":"bool","message":"string","state":"string"}],"sensitive":true},` +
		`"control_plane_endpoint":{"value":{"host":"10.0.0.10","port":6443},"type":["object",{"host":"string","port":"number"}],"sensitive":true},` +
		`"failure_domains":{"value":[{"attributes":{"zone":"a"},"control_plane":true,"name":"a"}],"type":["tuple",[["object",{"attributes":["object",{"zone":"string"}],"control_plane":"bool","name":"string"}]]],"sensitive":true},` +
		`"exports":{"value":{"cidr":"10.0.0.0/16"},"type":["object",{"cidr":"string"}],"sensitive":true}},"resources":[`)
	const tail = `],"check_results":null}`
	for i := 0; b.Len() < size-len(tail)-2600; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"mode":"managed","type":"terraform_data","name":"node","index_key":%d,"provider":"provider[\"terraform.io/builtin/terraform\"]","instances":[{"schema_version":0,"attributes":{"id":"%s","input":{"value":{"name":"node-%d","labels":{"role":"worker","pool":"default","zone":"a"},"userdata":"%s"},"type":["object",{"labels":["map","string"],"name":"string","userdata":"string"}]},"output":{"value":{"name":"node-%d","labels":{"role":"worker","pool":"default","zone":"a"},"userdata":"%s"},"type":["object",{"labels":["map","string"],"name":"string","userdata":"string"}]},"triggers_replace":null},"sensitive_attributes":[],"dependencies":["terraform_data.network","terraform_data.zone[\"a\"]","terraform_data.zone[\"b\"]"]}]}`,
			i, random(32), i, random(512)+bytesRepeat("#cloud-config\\npackages: [curl, jq]\\n", 12), i, random(64))
	}
	// Pad to the exact size with whitespace before the closing brace.
	b.WriteString(tail[:len(tail)-1])
	b.Write(bytes.Repeat([]byte{' '}, size-b.Len()-1))
	b.WriteByte('}')
	return b.Bytes()
}

func bytesRepeat(s string, n int) string { return string(bytes.Repeat([]byte(s), n)) }

// syntheticSecrets compresses a state as the backend does and cuts it into n chunks.
func syntheticSecrets(tb testing.TB, plain []byte, n int) []corev1.Secret {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(plain); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	data := buf.Bytes()
	size := (len(data) + n - 1) / n
	if size > 1<<20 {
		tb.Fatalf("%d compressed bytes do not fit %d Secrets of 1 MiB", len(data), n)
	}
	base := contract.StateSecretName("bench0123456789ab-c")
	out := make([]corev1.Secret, 0, n)
	for i := 0; len(data) > 0; i++ {
		k := min(size, len(data))
		out = append(out, secret(ChunkName(base, i), data[:k]))
		data = data[k:]
	}
	return out
}

// BenchmarkDecode reads states through Decode: the largest the reader accepts (32 chunks,
// 64 MiB decompressed) and a typical one. B/op far below the state's size shows that the
// reader streams: it holds one resource at a time, never the document. "alloc/state" is B/op
// divided by the decompressed size.
//
//	go test ./internal/captf/state -run '^$' -bench BenchmarkDecode -benchmem -benchtime 10x
func BenchmarkDecode(b *testing.B) {
	for _, bc := range []struct {
		name   string
		size   int
		chunks int
	}{
		{"1MiB-1chunk", 1 << 20, 1},
		{"64MiB-32chunks", MaxStateBytes, 32},
	} {
		b.Run(bc.name, func(b *testing.B) {
			plain := syntheticState(bc.size)
			secrets := syntheticSecrets(b, plain, bc.chunks)
			plain = nil
			s, err := Decode(secrets, "bench0123456789ab-c")
			if err != nil {
				b.Fatal(err)
			}
			if len(s.Chunks) != bc.chunks || s.DecompressedBytes != int64(bc.size) {
				b.Fatalf("read %d chunks, %d bytes; want %d, %d", len(s.Chunks), s.DecompressedBytes, bc.chunks, bc.size)
			}
			b.SetBytes(s.DecompressedBytes)
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				if _, err := Decode(secrets, "bench0123456789ab-c"); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			perOp := float64(after.TotalAlloc-before.TotalAlloc) / float64(b.N)
			b.ReportMetric(perOp/float64(s.DecompressedBytes), "alloc/state")
			b.ReportMetric(float64(s.Bytes)/float64(1<<20), "compressed-MiB")
			b.ReportMetric(float64(s.Resources), "resources")
		})
	}
}

// TestDecodeMemoryBound is the benchmark's claim as a check in the default run: decoding a
// 16 MiB state in 8 chunks allocates a small fraction of its size.
func TestDecodeMemoryBound(t *testing.T) {
	const size = 16 << 20
	secrets := syntheticSecrets(t, syntheticState(size), 8)
	if _, err := Decode(secrets, "bench0123456789ab-c"); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, err := Decode(secrets, "bench0123456789ab-c")
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("decoded %d bytes (%d resources) in %d chunks allocating %d bytes", s.DecompressedBytes, s.Resources, len(s.Chunks), allocated)
	if allocated > size/8 {
		t.Errorf("decoding a %d-byte state allocated %d bytes; the reader should stream", size, allocated)
	}
}
