package gpucheck

import "github.com/capx-io/capx/internal/gpucheck"

// What a report lists, in text and in JSON alike (the summary always counts every
// reservation read): -o json used to print every other team's reservation under -orphans.
const (
	listedOrphans = "orphans" // -orphans, `kubectl capvco gpucheck orphans`
	listedCAPVCO  = "capvco"  // every reservation but the foreign ones
	listedAll     = "all"     // --all
)

func (o *Options) listed() string {
	switch {
	case o.All:
		return listedAll
	case o.OnlyOrphans:
		return listedOrphans
	}
	return listedCAPVCO
}

// shown is what the report lists.
func (o *Options) shown(rep *gpucheck.Report) []gpucheck.Finding {
	out := []gpucheck.Finding{}
	for _, f := range rep.Findings {
		switch o.listed() {
		case listedOrphans:
			if !f.Orphan {
				continue
			}
		case listedCAPVCO:
			if f.Class == gpucheck.Foreign {
				continue
			}
		}
		out = append(out, f)
	}
	return out
}
