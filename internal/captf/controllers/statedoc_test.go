package controllers_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capx-io/capx/internal/captf/contract"
)

// stateDocument is the decompressed data of an object's state Secret, read from the API server.
func stateDocument(t *testing.T, ns, kind, name string) []byte {
	t.Helper()
	_, doc := stateSecret(t, ns, kind, name)
	return doc
}

// stateSecret is an object's state Secret (one chunk) and its decompressed data.
func stateSecret(t *testing.T, ns, kind, name string) (*corev1.Secret, []byte) {
	t.Helper()
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: ns, Name: contract.StateSecretName(contract.StateSuffix(ns, kind, name))}
	if err := env.Client.Get(context.Background(), key, s); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(s.Data[contract.BackendStateKey]))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return s, doc
}

// editState rewrites an object's state in its Secret as a hand edit would (same lineage, next
// serial) and returns that serial. terraform_data has no remote object to change behind
// OpenTofu's back, so this is how a test makes real drift offline: a refresh reads back what
// the state records, and the plan after it has to change the object back (see
// runner.TestDrift). An edit that changes nothing moves the state on (moveStateOn).
func editState(t *testing.T, ns, kind, name string, edit func(map[string]any)) int64 {
	t.Helper()
	s, doc := stateSecret(t, ns, kind, name)
	var st map[string]any
	if err := json.Unmarshal(doc, &st); err != nil {
		t.Fatal(err)
	}
	edit(st)
	st["serial"] = st["serial"].(float64) + 1
	doc, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(doc)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	s.Data[contract.BackendStateKey] = gz.Bytes()
	if err := env.Client.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return int64(st["serial"].(float64))
}

// moveStateOn writes an object's state again under the next serial, with the same contents,
// and returns that serial, once state.Read (what the manager reads) reads it back.
func moveStateOn(t *testing.T, ns, kind, name string) int64 {
	t.Helper()
	serial := editState(t, ns, kind, name, func(map[string]any) {})
	if got := readState(t, ns, kind, name).Serial; got != serial {
		t.Fatalf("the state reads serial %d after the write of %d", got, serial)
	}
	return serial
}
