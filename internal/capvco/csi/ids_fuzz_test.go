package csi

import (
	"testing"
)

func FuzzParseMarker(f *testing.F) {
	f.Add("capvco-csi/v1 cluster=team-a/prod name=pvc-1 key=vault:v1:AAAA")
	f.Add("capvco-csi/v1 cluster=a/b name=c")
	f.Add("Boot disk of cp-0")
	f.Fuzz(func(t *testing.T, desc string) {
		m, err := parseMarker(desc)
		if err != nil {
			return
		}
		again, err := parseMarker(m.String())
		if err != nil || again != m {
			t.Fatalf("%q: round trip %+v -> %+v (%v)", desc, m, again, err)
		}
	})
}

func FuzzParseIDs(f *testing.F) {
	f.Add("nl-rmd-dc01-001/105")
	f.Add("nl-rmd-dc01-001/105/snap-000002")
	f.Fuzz(func(t *testing.T, id string) {
		if loc, disk, err := ParseVolumeID(id); err == nil && VolumeID(loc, disk) != id {
			t.Fatalf("volume id %q does not round-trip", id)
		}
		if loc, disk, snap, err := ParseSnapshotID(id); err == nil && SnapshotID(loc, disk, snap) != id {
			t.Fatalf("snapshot id %q does not round-trip", id)
		}
	})
}
