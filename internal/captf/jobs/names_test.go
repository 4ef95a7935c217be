package jobs

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
)

func TestName(t *testing.T) {
	tests := []struct {
		kind, name, op string
		attempt        int
		want           string
	}{
		{captfv1.KindMachine, "m1", "apply", 1, "captf-m-m1-apply-a1-"},
		{captfv1.KindMachinePool, "pool-a1-apply", "destroy", 12, "captf-mp-pool-a1-apply-destroy-a12-"},
		{captfv1.KindCluster, "c.example", "restore", 0, "captf-c-c.example-restore-a0-"},
		// 57 characters exactly stay verbatim.
		{captfv1.KindMachine, strings.Repeat("n", 31), "refresh", 1, "captf-m-" + strings.Repeat("n", 31) + "-refresh-a1-"},
		// One more, and the object name is hashed.
		{captfv1.KindMachine, strings.Repeat("n", 32), "refresh", 1, "captf-m-" + hash16(strings.Repeat("n", 32)) + "-refresh-a1-"},
		{captfv1.KindMachinePool, strings.Repeat("x", 253), "restore", 123456789, "captf-mp-" + hash16(strings.Repeat("x", 253)) + "-restore-a123456789-"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			g := NewWithT(t)
			got := Name(tt.kind, tt.name, tt.op, tt.attempt, "h2:abc")
			g.Expect(got).To(HavePrefix(tt.want))
			g.Expect(got).To(MatchRegexp(`-[0-9a-f]{6}$`))
			g.Expect(len(got)).To(BeNumerically("<=", MaxNameLength))
			g.Expect(Name(tt.kind, tt.name, tt.op, tt.attempt, "h2:abc")).To(Equal(got), "deterministic")

			n, ok := ParseName(got)
			g.Expect(ok).To(BeTrue())
			g.Expect(n.String()).To(Equal(got))
			g.Expect(n.Op).To(Equal(tt.op))
			g.Expect(n.Attempt).To(Equal(tt.attempt))
			g.Expect(n.IsFor(tt.kind, tt.name)).To(BeTrue())
			g.Expect(n.IsFor(tt.kind, tt.name+"x")).To(BeFalse())
			g.Expect(n.IsFor(captfv1.KindCluster, tt.name) && tt.kind != captfv1.KindCluster).To(BeFalse())
		})
	}

	g := NewWithT(t)
	base := Name(captfv1.KindMachine, "m1", "apply", 1, "h2:abc")
	for _, other := range []string{
		Name(captfv1.KindMachine, "m1", "apply", 1, "h2:abd"),
		Name(captfv1.KindMachine, "m1", "apply", 2, "h2:abc"),
		Name(captfv1.KindMachine, "m1", "destroy", 1, "h2:abc"),
	} {
		g.Expect(other).NotTo(Equal(base))
	}
	g.Expect(RunSecretName(base)).To(Equal("captf-run-" + base))
}

func TestParseNameRefuses(t *testing.T) {
	for _, s := range []string{
		"", "captf-", "captf-m-m1-apply-a1", "captf-m-m1-apply-a1-abcdeg", "captf-m-m1-apply-a1-ABCDEF",
		"captf-m-m1-apply-a01-abcdef", "captf-m-m1-apply-a-1-abcdef", "captf-m-m1-apply-1-abcdef",
		"captf-m-m1-upgrade-a1-abcdef", "captf-x-m1-apply-a1-abcdef", "captf-m--apply-a1-abcdef",
		"captf-mapply-a1-abcdef", "other-m-m1-apply-a1-abcdef", "captf-m-m1-apply-a1-abcdef-x7k2p",
		"captf-m-" + strings.Repeat("n", 34) + "-apply-a1-abcdef",
	} {
		if n, ok := ParseName(s); ok {
			t.Errorf("ParseName(%q) = %+v, want not ours", s, n)
		}
	}
}

func TestParseHolder(t *testing.T) {
	job := Name(captfv1.KindMachine, strings.Repeat("n", 33), "apply", 3, "h2:x")
	g := NewWithT(t)
	g.Expect(len(job)).To(Equal(MaxNameLength))
	tests := []struct {
		who string
		ok  bool
	}{
		{"@" + job + "-x7k2p", true},
		{"nobody@" + job + "-bcd24", true},
		{"user@laptop", false},
		{"@" + job, false},
		{"@" + job + "-aeiou", false}, // the API server's suffixes have no vowels
		{"@" + job + "-x7k2", false},
		{job + "-x7k2p", false},
		{"@captf-m-m1-apply-a1-abcdef.cluster.local-x7k2p", false},
	}
	for _, tt := range tests {
		n, ok := ParseHolder(tt.who)
		if ok != tt.ok {
			t.Errorf("ParseHolder(%q) ok = %v, want %v", tt.who, ok, tt.ok)
		}
		if ok && n.String() != job {
			t.Errorf("ParseHolder(%q) = %s, want %s", tt.who, n, job)
		}
	}
}

// FuzzParseName: ParseName reads the holder of a state lock, which anything with access to
// the namespace can write. It never panics, and what it accepts is exactly a name Name writes.
func FuzzParseName(f *testing.F) {
	f.Add(Name(captfv1.KindMachine, "m1", "apply", 1, "h2:x"))
	f.Add(Name(captfv1.KindMachinePool, "p-apply-a1-abcdef", "restore", 10, ""))
	f.Add("captf-m-m1-apply-a01-abcdef")
	f.Add("@captf-c-c-drift-a2-000000-x7k2p")
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ParseName(s)
		if ok && n.String() != s {
			t.Fatalf("ParseName(%q) = %+v, which writes %q", s, n, n.String())
		}
		if h, ok := ParseHolder(s); ok && !strings.HasPrefix(s[strings.LastIndexByte(s, '@')+1:], h.String()+"-") {
			t.Fatalf("ParseHolder(%q) = %s", s, h)
		}
	})
}
