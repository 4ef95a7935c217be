package gpuname

import (
	"errors"
	"strings"
	"testing"
)

func TestBuild(t *testing.T) {
	for _, tc := range []struct {
		owner   Owner
		index   int
		want    string
		wantErr string
	}{
		{owner: Owner{"ns", "c1", "gpu-0"}, index: 0, want: "capvco_ns_c1_gpu-0_gpu_0"},
		{owner: Owner{"team-a", "prod.eu", "prod.eu-md-0-x7k2q"}, index: 7, want: "capvco_team-a_prod.eu_prod.eu-md-0-x7k2q_gpu_7"},
		{owner: Owner{"ns", "c1", "m"}, index: MaxIndex, want: "capvco_ns_c1_m_gpu_63"},
		{owner: Owner{"ns", "c1", "m"}, index: -1, wantErr: "index -1"},
		{owner: Owner{"ns", "c1", "m"}, index: MaxIndex + 1, wantErr: "index 64"},
		{owner: Owner{"Ns", "c1", "m"}, index: 0, wantErr: "namespace"},
		{owner: Owner{"ns.dot", "c1", "m"}, index: 0, wantErr: "namespace"},
		{owner: Owner{"ns", "c_1", "m"}, index: 0, wantErr: "cluster"},
		{owner: Owner{"ns", "", "m"}, index: 0, wantErr: "cluster"},
		{owner: Owner{"ns", "c1", "m_0"}, index: 0, wantErr: "machine"},
		{owner: Owner{"", "c1", "m"}, index: 0, wantErr: "namespace"},
	} {
		got, err := Build(tc.owner, tc.index)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Build(%+v, %d) = %q, %v; want error containing %q", tc.owner, tc.index, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Build(%+v, %d) = %q, %v; want %q", tc.owner, tc.index, got, err, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		want  Name
		class Class
	}{
		{name: "capvco_ns_c1_gpu-0_gpu_0", want: Name{Owner{"ns", "c1", "gpu-0"}, 0}, class: Owned},
		{name: "capvco_team-a_prod.eu_w.1_gpu_12", want: Name{Owner{"team-a", "prod.eu", "w.1"}, 12}, class: Owned},
		// Not exact: each of these starts with capvco and is therefore "renamed".
		{name: "capvco_ns_c1_m_gpu_01", class: Renamed},
		{name: "capvco_ns_c1_m_gpu_+1", class: Renamed},
		{name: "capvco_ns_c1_m_gpu_-1", class: Renamed},
		{name: "capvco_ns_c1_m_gpu_64", class: Renamed},
		{name: "capvco_ns_c1_m_gpu_", class: Renamed},
		{name: "capvco_ns_c1_m_gpu_0_", class: Renamed},
		{name: "capvco_ns_c1_m_gpu_0 ", class: Renamed},
		{name: "capvco_ns_c1_m_vgpu_0", class: Renamed},
		{name: "capvco_ns_c1_m_extra_gpu_0", class: Renamed},
		{name: "capvco_ns__m_gpu_0", class: Renamed},
		{name: "capvco_NS_c1_m_gpu_0", class: Renamed},
		{name: "capvco_ns_c1_M_gpu_0", class: Renamed},
		{name: "capvco_n.s_c1_m_gpu_0", class: Renamed},
		{name: "capvco_ns_c1_-m_gpu_0", class: Renamed},
		{name: "CAPVCO_ns_c1_m_gpu_0", class: Renamed},
		{name: "capvco-ns-c1-m-gpu-0", class: Renamed},
		{name: "capvco", class: Renamed},
		{name: "capvco_ns_c1_m_gpu_0-renamed", class: Renamed},
		{name: "my-training-gpu", class: Foreign},
		{name: "", class: Foreign},
		{name: "capv", class: Foreign},
		{name: "xcapvco_ns_c1_m_gpu_0", class: Foreign},
	} {
		got, err := Parse(tc.name)
		if tc.class == Owned {
			if err != nil || got != tc.want {
				t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.name, got, err, tc.want)
			}
			if s := got.String(); s != tc.name {
				t.Errorf("Parse(%q).String() = %q", tc.name, s)
			}
		} else if err == nil || !errors.Is(err, ErrNotOurs) {
			t.Errorf("Parse(%q) = %+v, %v; want ErrNotOurs", tc.name, got, err)
		}
		if c := Classify(tc.name); c != tc.class {
			t.Errorf("Classify(%q) = %s, want %s", tc.name, c, tc.class)
		}
		if LooksOurs(tc.name) != (tc.class != Foreign) {
			t.Errorf("LooksOurs(%q) = %v", tc.name, LooksOurs(tc.name))
		}
	}
}

func TestOwnedBy(t *testing.T) {
	name := "capvco_ns_c1_m-0_gpu_1"
	if !OwnedByCluster(name, "ns", "c1") || OwnedByCluster(name, "ns", "c") || OwnedByCluster(name, "n", "c1") {
		t.Error("OwnedByCluster is not exact")
	}
	// A cluster named "c1" must not claim the reservations of cluster "c1-x" (a prefix guess would).
	if OwnedByCluster("capvco_ns_c1-x_m_gpu_0", "ns", "c1") {
		t.Error("OwnedByCluster matched a prefix")
	}
	if !OwnedByMachine(name, Owner{"ns", "c1", "m-0"}) || OwnedByMachine(name, Owner{"ns", "c1", "m"}) {
		t.Error("OwnedByMachine is not exact")
	}
	if OwnedByCluster("capvco_ns_c1_m-0_gpu_1-old", "ns", "c1") {
		t.Error("a renamed reservation was claimed")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"capvco_ns_c1_m_gpu_0", "capvco_a_b.c_d-e_gpu_63", "capvco__", "capvco_ns_c1_m_gpu_01", "", "_____"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			if Classify(s) == Owned {
				t.Fatalf("Classify(%q) = owned but Parse failed: %v", s, err)
			}
			return
		}
		if got := n.String(); got != s {
			t.Fatalf("Parse(%q).String() = %q: not exact", s, got)
		}
		if b, err := Build(n.Owner, n.Index); err != nil || b != s {
			t.Fatalf("Build(Parse(%q)) = %q, %v", s, b, err)
		}
		if !OwnedByMachine(s, n.Owner) || !OwnedByCluster(s, n.Namespace, n.Cluster) || !LooksOurs(s) {
			t.Fatalf("%q parses but is not owned by %+v", s, n)
		}
	})
}

func FuzzBuild(f *testing.F) {
	f.Add("ns", "c1", "m", 0)
	f.Add("a_b", "c", "d", 3)
	f.Fuzz(func(t *testing.T, ns, cluster, machine string, index int) {
		o := Owner{ns, cluster, machine}
		s, err := Build(o, index)
		if err != nil {
			return
		}
		n, err := Parse(s)
		if err != nil || n.Owner != o || n.Index != index {
			t.Fatalf("Parse(Build(%+v, %d)) = %+v, %v", o, index, n, err)
		}
	})
}
