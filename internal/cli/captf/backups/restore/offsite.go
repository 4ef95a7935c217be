package restore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/offsite"
	"github.com/capx-io/capx/internal/captf/state"
	"github.com/capx-io/capx/internal/cli/captf/backups/list"
	"github.com/capx-io/capx/internal/cli/captf/backups/offsiteflags"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// checkFrom refuses a --from that is neither offsite nor s3://.
func checkFrom(from string) error {
	if from == "" || from == "offsite" || strings.HasPrefix(from, "s3://") {
		return nil
	}
	return cmdutil.Usagef("--from %q: want offsite (with --serial) or s3://BUCKET/KEY", from)
}

// offsiteSource is an offsite copy downloaded and checked, ready to be written as a backup.
type offsiteSource struct {
	copy offsite.Copy
	data []byte
	// snap is what the bytes decode to (nil with decodeErr).
	snap      *state.Snapshot
	decodeErr error
	o         *objects.Object
	suffix    string
}

// fetchOffsite finds the copy --from names, downloads it and checks its integrity (the store
// refuses bytes of another digest than recorded) and what it decodes to.
func fetchOffsite(ctx context.Context, c client.Reader, opts *Options, o *objects.Object, l list.List) (*offsiteSource, error) {
	store, err := opts.Flags.Store(ctx, c)
	if err != nil {
		return nil, err
	}
	key, err := offsiteKey(ctx, store, opts, o)
	if err != nil {
		return nil, err
	}
	cp, data, err := store.Download(ctx, key)
	if err != nil {
		return nil, err
	}
	src := &offsiteSource{copy: cp, data: data, o: o, suffix: l.Suffix}
	src.snap, src.decodeErr = state.SnapshotOf(o.Namespace(), l.Suffix, data, nil)
	return src, nil
}

// offsiteKey resolves --from to a key of o's own copies.
func offsiteKey(ctx context.Context, store *offsite.Store, opts *Options, o *objects.Object) (string, error) {
	obj := offsiteflags.Object(o)
	if opts.From != "offsite" {
		key, err := store.Target().ParseLocation(opts.From)
		if err != nil {
			return "", err
		}
		pk, err := offsite.ParseKey(store.Target().Prefix, key)
		if err != nil {
			return "", err
		}
		switch {
		case pk.Object != obj:
			return "", fmt.Errorf("%s is a copy of %s, not of %s: a copy is restored only into its own object", opts.From, pk.Object, obj)
		case opts.Serial >= 0 && pk.Serial != opts.Serial:
			return "", fmt.Errorf("%s is serial %d, not the --serial %d", opts.From, pk.Serial, opts.Serial)
		}
		return key, nil
	}
	copies, _, err := store.List(ctx, obj)
	if err != nil {
		return "", err
	}
	var serials []string
	for _, cp := range copies {
		if cp.Serial == opts.Serial {
			return cp.Key, nil // the newest copy of the serial
		}
		serials = append(serials, fmt.Sprint(cp.Serial))
	}
	if len(serials) == 0 {
		serials = []string{"none"}
	}
	return "", cmdutil.WithCode(cmdutil.ExitFound, fmt.Errorf("no offsite copy of serial %d of %s in %s (serials there: %s)",
		opts.Serial, obj, store.Target(), strings.Join(serials, ", ")))
}

// offsiteChecks are Checks for the offsite copy in place of an in-cluster backup: it must be
// intact and decode to the serial and lineage it records; the lineage, lock and Job checks are
// the in-cluster restore's. A paused object passes: the copy is written and the restore
// requested now, and the manager runs it once the object is unpaused (the way to bring state
// back into an object re-created from git before it applies).
func offsiteChecks(l list.List, o *objects.Object, lock state.Lock, lockErr error, src *offsiteSource) []Check {
	cp := src.copy
	intact := Check{"offsite copy intact", true, fmt.Sprintf("%s: %d bytes, sha256 %s as recorded, serial %d, lineage %s, %d resources",
		cp.Location, cp.Bytes, cp.Digest[:12], cp.Serial, cp.Lineage, cp.Resources)}
	switch {
	case src.decodeErr != nil:
		intact = Check{"offsite copy intact", false, fmt.Sprintf("%s does not decode as a state: %v", cp.Location, src.decodeErr)}
	case src.snap.Serial != cp.Serial || src.snap.Lineage != cp.Lineage:
		intact = Check{"offsite copy intact", false, fmt.Sprintf("%s holds serial %d of lineage %s, but records serial %d of lineage %s",
			cp.Location, src.snap.Serial, src.snap.Lineage, cp.Serial, cp.Lineage)}
	}
	l.Backups = []list.Backup{{Serial: cp.Serial, Lineage: cp.Lineage, Secret: cp.Location, Complete: true, Resources: cp.Resources}}
	checks, _ := Checks(l, o, lock, lockErr, cp.Serial)
	checks[0] = intact
	for i, ch := range checks {
		if ch.Name == "not paused" {
			checks[i] = Check{"not paused", true, "the object is paused: the copy is written and the restore requested now; the manager runs it once the object is unpaused"}
		}
	}
	return checks
}

// write writes the copy into a backup set of the object.
func (src *offsiteSource) write(ctx context.Context, c client.Client, now time.Time) (string, error) {
	ref, err := state.OwnerReference(src.o.Obj, c.Scheme())
	if err != nil {
		return "", err
	}
	return state.ImportBackup(ctx, c, src.o.Namespace(), src.suffix, ref, state.Imported{Serial: src.copy.Serial, Lineage: src.copy.Lineage,
		Digest: src.copy.Digest, InputsHash: src.copy.InputsHash, Location: src.copy.Location, Labels: src.o.Owner().MoveLabels()}, src.data, now)
}
