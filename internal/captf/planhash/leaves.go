package planhash

import (
	"reflect"

	tfjson "github.com/hashicorp/terraform-json"
)

// leafChanges lists the leaves that differ between a change's before and after objects, in
// walk order (object keys sorted, list indexes ascending). A leaf differs when its value
// differs, when it is present on one side only (absent is not null), when it becomes unknown
// until apply, or when its sensitivity changes. Each entry carries its path as a JSON array of
// strings (object and map keys) and numbers (list indexes), so a["0"] and a[0] never collide.
func leafChanges(ch *tfjson.Change) []map[string]any {
	w := &leafWalker{}
	w.walk(nil, side{ch.Before, true}, side{ch.After, true}, ch.AfterUnknown, ch.BeforeSensitive, ch.AfterSensitive)
	if w.out == nil {
		return []map[string]any{}
	}
	return w.out
}

// side is one side of a leaf: ok is false when the key or index does not exist there.
type side struct {
	v  any
	ok bool
}

type leafWalker struct{ out []map[string]any }

func (w *leafWalker) walk(path []any, b, a side, unknown, bSens, aSens any) {
	if unknown == true {
		w.emit(path, b, side{}, true, bSens == true, aSens == true)
		return
	}
	bm, bIsMap := b.v.(map[string]any)
	am, aIsMap := a.v.(map[string]any)
	if b.ok && a.ok && bIsMap && aIsMap {
		keys := map[string]bool{}
		for k := range bm {
			keys[k] = true
		}
		for k := range am {
			keys[k] = true
		}
		if um, ok := unknown.(map[string]any); ok {
			for k := range um {
				keys[k] = true
			}
		}
		for _, k := range sortedKeys(keys) {
			bv, bok := bm[k]
			av, aok := am[k]
			w.walk(append(path, k), side{bv, bok}, side{av, aok}, child(unknown, k), child(bSens, k), child(aSens, k))
		}
		return
	}
	bl, bIsList := b.v.([]any)
	al, aIsList := a.v.([]any)
	if b.ok && a.ok && bIsList && aIsList {
		n := max(len(bl), len(al))
		if ul, ok := unknown.([]any); ok {
			n = max(n, len(ul))
		}
		for i := range n {
			w.walk(append(path, i), index(bl, i), index(al, i), child(unknown, i), child(bSens, i), child(aSens, i))
		}
		return
	}
	bs, as := bSens == true, aSens == true
	if b.ok == a.ok && bs == as && reflect.DeepEqual(b.v, a.v) {
		return
	}
	w.emit(path, b, a, false, bs, as)
}

func (w *leafWalker) emit(path []any, b, a side, unknown, bSens, aSens bool) {
	e := map[string]any{"path": append([]any{}, path...)}
	if b.ok {
		e["before"] = b.v
	}
	if a.ok {
		e["after"] = a.v
	}
	if unknown {
		e["after_unknown"] = true
	}
	if bSens {
		e["before_sensitive"] = true
	}
	if aSens {
		e["after_sensitive"] = true
	}
	w.out = append(w.out, e)
}

func index(l []any, i int) side {
	if i < len(l) {
		return side{l[i], true}
	}
	return side{}
}

// child descends into an unknown or sensitive marker tree; true marks a whole subtree.
func child(marker any, key any) any {
	switch m := marker.(type) {
	case bool:
		return m
	case map[string]any:
		if k, ok := key.(string); ok {
			return m[k]
		}
	case []any:
		if i, ok := key.(int); ok && i < len(m) {
			return m[i]
		}
	}
	return nil
}
