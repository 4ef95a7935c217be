package inputs

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
)

func TestResolveVariables(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t)
	optIn := map[string]string{captfv1.VariablesLabel: "true"}
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain", Labels: optIn},
			Data:       map[string]string{"region": "eu-1", "size": "3", "shared": "from-plain"},
			BinaryData: map[string][]byte{"blob": []byte("bytes")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "typed", Labels: optIn},
			Data: map[string]string{"size": "3.10", "zones": `["a", "b"]`, "shared": `{"from": "typed"}`}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "secret", Labels: optIn},
			Data: map[string][]byte{"token": []byte("s3cr3t-value"), "shared": []byte("from-secret")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled"}, Data: map[string]string{"a": "b"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "reserved", Labels: optIn},
			Data: map[string]string{"machine_name": "x"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "badname", Labels: optIn},
			Data: map[string]string{"a.b": "x"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "badjson", Labels: optIn},
			Data: map[string][]byte{"conf": []byte(`{"password": "hunter2"`)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "binary", Labels: optIn},
			Data: map[string][]byte{"key": {0xff, 0xfe, 's', 'e', 'c'}}},
	} {
		obj.SetNamespace(ns)
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	cm := func(name string, format captfv1.VariablesFormat) captfv1.VariablesSource {
		return captfv1.VariablesSource{ConfigMapRef: &corev1.LocalObjectReference{Name: name}, Format: format}
	}
	sec := func(name string, format captfv1.VariablesFormat) captfv1.VariablesSource {
		return captfv1.VariablesSource{SecretRef: &corev1.LocalObjectReference{Name: name}, Format: format}
	}
	optional := func(s captfv1.VariablesSource) captfv1.VariablesSource { s.Optional = true; return s }
	inline := func(kv ...string) map[string]apiextensionsv1.JSON {
		m := map[string]apiextensionsv1.JSON{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = apiextensionsv1.JSON{Raw: []byte(kv[i+1])}
		}
		return m
	}

	tests := []struct {
		name      string
		spec      captfv1.WorkspaceSpec
		want      map[string]string
		sensitive []string
		skipped   int
		err       error
		message   string
	}{
		{name: "nothing", want: map[string]string{}},
		{
			name: "String format passes text verbatim, binaryData too",
			spec: captfv1.WorkspaceSpec{VariablesFrom: []captfv1.VariablesSource{cm("plain", "")}},
			want: map[string]string{"region": `"eu-1"`, "size": `"3"`, "shared": `"from-plain"`, "blob": `"bytes"`},
		},
		{
			name: "JSON format decodes and keeps number literals",
			spec: captfv1.WorkspaceSpec{VariablesFrom: []captfv1.VariablesSource{cm("typed", captfv1.VariablesFormatJSON)}},
			want: map[string]string{"size": `3.10`, "zones": `["a","b"]`, "shared": `{"from":"typed"}`},
		},
		{
			name: "later sources win; Secret values are sensitive",
			spec: captfv1.WorkspaceSpec{VariablesFrom: []captfv1.VariablesSource{cm("plain", ""), sec("secret", ""), cm("typed", captfv1.VariablesFormatJSON)}},
			want: map[string]string{
				"region": `"eu-1"`, "size": `3.10`, "blob": `"bytes"`, "zones": `["a","b"]`,
				"token": `"s3cr3t-value"`, "shared": `{"from":"typed"}`,
			},
			sensitive: []string{"token"},
		},
		{
			name: "a Secret that wins makes the variable sensitive",
			spec: captfv1.WorkspaceSpec{VariablesFrom: []captfv1.VariablesSource{cm("plain", ""), sec("secret", "")}},
			want: map[string]string{
				"region": `"eu-1"`, "size": `"3"`, "blob": `"bytes"`, "token": `"s3cr3t-value"`, "shared": `"from-secret"`,
			},
			sensitive: []string{"token", "shared"},
		},
		{
			name: "spec.variables win over every source and are not sensitive",
			spec: captfv1.WorkspaceSpec{
				VariablesFrom: []captfv1.VariablesSource{sec("secret", "")},
				Variables:     inline("token", `"inline"`, "n", `1.50`, "obj", `{"b": 1, "a": 2}`),
			},
			want:      map[string]string{"token": `"inline"`, "shared": `"from-secret"`, "n": `1.50`, "obj": `{"a":2,"b":1}`},
			sensitive: []string{"shared"},
		},
		{
			name:    "optional sources may be missing or unlabelled",
			spec:    captfv1.WorkspaceSpec{VariablesFrom: []captfv1.VariablesSource{optional(cm("nope", "")), optional(cm("unlabelled", "")), optional(sec("nope", ""))}},
			want:    map[string]string{},
			skipped: 3,
		},
		{
			name:    "a missing source",
			spec:    captfv1.WorkspaceSpec{VariablesFrom: []captfv1.VariablesSource{sec("nope", "")}},
			err:     ErrVariablesSourceNotFound,
			message: "Secret nope not found in namespace " + ns + "; create it (labelled captf.io/variables=true) or mark the source optional",
		},
		{
			name:    "an unlabelled source counts as missing",
			spec:    captfv1.WorkspaceSpec{VariablesFrom: []captfv1.VariablesSource{cm("unlabelled", "")}},
			err:     ErrVariablesSourceNotFound,
			message: "add the label captf.io/variables=true",
		},
		{
			name:    "a reserved key",
			spec:    captfv1.WorkspaceSpec{VariablesFrom: []captfv1.VariablesSource{cm("reserved", "")}},
			err:     ErrVariablesInvalid,
			message: `variable "machine_name" in ConfigMap reserved is reserved`,
		},
		{
			name:    "a key that is no variable name",
			spec:    captfv1.WorkspaceSpec{VariablesFrom: []captfv1.VariablesSource{cm("badname", "")}},
			err:     ErrVariablesInvalid,
			message: `variable "a.b" in ConfigMap badname is not a valid name`,
		},
		{
			name:    "a reserved inline name",
			spec:    captfv1.WorkspaceSpec{Variables: inline("captf_tags", `{}`)},
			err:     ErrVariablesInvalid,
			message: `variable "captf_tags" in spec.variables is reserved`,
		},
		{
			name:    "a value that is not JSON",
			spec:    captfv1.WorkspaceSpec{VariablesFrom: []captfv1.VariablesSource{sec("badjson", captfv1.VariablesFormatJSON)}},
			err:     ErrVariablesInvalid,
			message: `key "conf" of Secret badjson (variablesFrom[0], format JSON): the value is not valid JSON`,
		},
		{
			name:    "a value that is not text",
			spec:    captfv1.WorkspaceSpec{VariablesFrom: []captfv1.VariablesSource{sec("binary", "")}},
			err:     ErrVariablesInvalid,
			message: `key "key" of Secret binary (variablesFrom[0], format String): the value is not UTF-8 text`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			vars, err := ResolveVariables(ctx, env.Client, ns, contract.RoleMachine, tt.spec)
			if tt.err != nil {
				g.Expect(err).To(HaveOccurred())
				g.Expect(errors.Is(err, tt.err)).To(BeTrue(), "%v", err)
				g.Expect(err.Error()).To(ContainSubstring(tt.message))
				for _, secret := range []string{"s3cr3t", "hunter2", "sec"} {
					g.Expect(err.Error()).NotTo(ContainSubstring(secret), "values never appear in errors")
				}
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			got := map[string]string{}
			for k, v := range vars.Values {
				got[k] = string(v)
			}
			g.Expect(got).To(Equal(tt.want))
			g.Expect(slices.Sorted(maps.Keys(vars.Sensitive))).To(ConsistOf(tt.sensitive))
			g.Expect(vars.Skipped).To(HaveLen(tt.skipped))
		})
	}
}

// jsonValueError are the only messages decoding may give: none quotes the value.
var jsonValueError = regexp.MustCompile(`^the value (is empty, not JSON|is not valid JSON \(at byte \d+\)|has more data after its first JSON value \(at byte \d+\)|is not UTF-8 text)$`)

// FuzzDecodeJSONValue feeds untrusted source values (any ConfigMap or Secret a user labels)
// through the JSON format's decoding: it never panics, a decoded value is compact JSON that
// decodes to itself, and an error never quotes the value.
func FuzzDecodeJSONValue(f *testing.F) {
	for _, seed := range []string{`1`, `1.50`, `"x"`, `{"b":1,"a":[true,null]}`, `{`, ``, ` 2 3`, "\xff", `"\u003c"`, `1e400`, `[[[[[]]]]]`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := decodeValue(in, captfv1.VariablesFormatJSON)
		if err != nil {
			if !jsonValueError.MatchString(err.Error()) {
				t.Fatalf("unexpected error text %q", err)
			}
			return
		}
		if !json.Valid(v) || !utf8.Valid(v) {
			t.Fatalf("decoded value %q is not valid JSON", v)
		}
		again, err := CompactJSON(v)
		if err != nil || string(again) != string(v) {
			t.Fatalf("decoding is not idempotent: %q -> %q (%v)", v, again, err)
		}
		if strings.ContainsAny(string(v), "\n\t") {
			t.Fatalf("decoded value %q is not compact", v)
		}
	})
}
