package inputs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
)

// Variables are the user variables of a run, ready to render.
type Variables struct {
	// Values are the variables by name, each one JSON value.
	Values map[string]json.RawMessage
	// Sensitive names the variables whose value came from a Secret; the generated root module
	// declares them sensitive, so plan output never shows them.
	Sensitive map[string]bool
	// Skipped describes the optional sources that were left out (missing or not opted in), for
	// an event: a typo in an optional source's name would otherwise go unnoticed.
	Skipped []string
}

// ErrVariablesSourceNotFound and ErrVariablesInvalid are the two ways variables fail; they are
// the VariablesSourceNotFound and VariablesInvalid condition reasons. Match them with errors.Is.
var (
	ErrVariablesSourceNotFound = errors.New(captfv1.VariablesSourceNotFoundReason)
	ErrVariablesInvalid        = errors.New(captfv1.VariablesInvalidReason)
)

// VariablesError is a variables failure the user must fix. Its message names the source and
// the variable, never a value: values may come from Secrets.
type VariablesError struct {
	// Reason is captfv1.VariablesSourceNotFoundReason or captfv1.VariablesInvalidReason.
	Reason string
	// Message says what is wrong and what to do.
	Message string
}

func (e *VariablesError) Error() string { return "inputs: resolve variables: " + e.Message }

// Is matches ErrVariablesSourceNotFound or ErrVariablesInvalid by Reason.
func (e *VariablesError) Is(target error) bool {
	return (target == ErrVariablesSourceNotFound && e.Reason == captfv1.VariablesSourceNotFoundReason) ||
		(target == ErrVariablesInvalid && e.Reason == captfv1.VariablesInvalidReason)
}

func invalid(format string, args ...any) error {
	return &VariablesError{Reason: captfv1.VariablesInvalidReason, Message: fmt.Sprintf(format, args...)}
}

// variableName is the contract's pattern for user variable names.
var variableName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]*$`)

// CheckVariableName returns a VariablesError when name cannot be a user variable of role:
// it breaks the contract's name pattern or collides with a contract input, a captf_ name or a
// module meta-argument. from names where the variable came from, for the message.
func CheckVariableName(role contract.Role, name, from string) error {
	if !variableName.MatchString(name) {
		return invalid("variable %q in %s is not a valid name: names must match %s", name, from, variableName)
	}
	if contract.IsReservedVariable(role, name) {
		return invalid("variable %q in %s is reserved for the %s module contract (captf_ names, the role's inputs and module arguments such as source or count): rename it", name, from, role)
	}
	return nil
}

// ResolveVariables reads an object's variables: each variablesFrom source in order, later ones
// winning, then spec.variables over all of them. Sources are read live through c, because a
// change to a source must reach the next run and the manager's cache holds only its own
// objects. A source must carry the label captf.io/variables=true: without it the manager would
// hand any Secret of the namespace to a module, so an unlabelled source counts as not found.
//
// A missing or unlabelled required source is ErrVariablesSourceNotFound; a bad name or a value
// that does not decode is ErrVariablesInvalid. Other errors (the API server unreachable) are
// returned as they are, to be retried.
func ResolveVariables(ctx context.Context, c client.Reader, namespace string, role contract.Role, spec captfv1.WorkspaceSpec) (Variables, error) {
	vars := Variables{Values: map[string]json.RawMessage{}, Sensitive: map[string]bool{}}
	for i, src := range spec.VariablesFrom {
		data, from, err := readSource(ctx, c, namespace, src)
		if err != nil {
			if src.Optional && errors.Is(err, ErrVariablesSourceNotFound) {
				vars.Skipped = append(vars.Skipped, err.(*VariablesError).Message)
				continue
			}
			return Variables{}, err
		}
		for _, key := range slices.Sorted(maps.Keys(data)) {
			if err := CheckVariableName(role, key, from); err != nil {
				return Variables{}, err
			}
			value, err := decodeValue(data[key], src.Format)
			if err != nil {
				return Variables{}, invalid("key %q of %s (variablesFrom[%d], format %s): %v", key, from, i, formatOf(src), err)
			}
			vars.Values[key] = value
			vars.Sensitive[key] = src.SecretRef != nil
		}
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Variables)) {
		if err := CheckVariableName(role, name, "spec.variables"); err != nil {
			return Variables{}, err
		}
		value, err := CompactJSON(spec.Variables[name].Raw)
		if err != nil {
			return Variables{}, invalid("spec.variables[%q]: %v", name, err)
		}
		vars.Values[name] = value
		// The value is in the object's spec for anyone who can read it; it is no secret.
		delete(vars.Sensitive, name)
	}
	for name, s := range vars.Sensitive {
		if !s {
			delete(vars.Sensitive, name)
		}
	}
	return vars, nil
}

// readSource returns a source's keys and values and a description of it for messages.
func readSource(ctx context.Context, c client.Reader, namespace string, src captfv1.VariablesSource) (map[string][]byte, string, error) {
	var obj client.Object
	var from string
	switch {
	case src.ConfigMapRef != nil:
		obj, from = &corev1.ConfigMap{}, "ConfigMap "+src.ConfigMapRef.Name
	case src.SecretRef != nil:
		obj, from = &corev1.Secret{}, "Secret "+src.SecretRef.Name
	default:
		return nil, "", invalid("a variablesFrom entry sets neither configMapRef nor secretRef")
	}
	name := src.ConfigMapRef
	if name == nil {
		name = src.SecretRef
	}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name.Name}, obj)
	if apierrors.IsNotFound(err) {
		return nil, from, &VariablesError{Reason: captfv1.VariablesSourceNotFoundReason,
			Message: fmt.Sprintf("%s not found in namespace %s; create it (labelled %s=true) or mark the source optional", from, namespace, captfv1.VariablesLabel)}
	}
	if err != nil {
		return nil, from, fmt.Errorf("inputs: read %s in namespace %s: %w", from, namespace, err)
	}
	if obj.GetLabels()[captfv1.VariablesLabel] != "true" {
		return nil, from, &VariablesError{Reason: captfv1.VariablesSourceNotFoundReason,
			Message: fmt.Sprintf("%s in namespace %s is not a variables source: add the label %s=true to it", from, namespace, captfv1.VariablesLabel)}
	}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		data := make(map[string][]byte, len(o.Data)+len(o.BinaryData))
		for k, v := range o.Data {
			data[k] = []byte(v)
		}
		for k, v := range o.BinaryData {
			data[k] = v
		}
		return data, from, nil
	case *corev1.Secret:
		return o.Data, from, nil
	}
	return nil, from, nil
}

func formatOf(src captfv1.VariablesSource) captfv1.VariablesFormat {
	if src.Format == "" {
		return captfv1.VariablesFormatString
	}
	return src.Format
}

// decodeValue turns a source value into one JSON value: a JSON string for format String, the
// value itself (checked and compacted) for format JSON. Errors never quote the value.
func decodeValue(raw []byte, format captfv1.VariablesFormat) (json.RawMessage, error) {
	if !utf8.Valid(raw) {
		return nil, errors.New("the value is not UTF-8 text")
	}
	switch format {
	case "", captfv1.VariablesFormatString:
		return marshalCanonical(string(raw))
	case captfv1.VariablesFormatJSON:
		return CompactJSON(raw)
	}
	return nil, fmt.Errorf("unknown format %q: use String or JSON", format)
}

// CompactJSON checks that raw is exactly one JSON value and returns it compacted, with numbers
// kept as written. Errors give the byte offset of the problem, never the content.
func CompactJSON(raw []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, jsonError(err, dec.InputOffset())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("the value has more data after its first JSON value (at byte %d)", dec.InputOffset())
	}
	return marshalCanonical(v)
}

func jsonError(err error, offset int64) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		offset = syn.Offset
	}
	if errors.Is(err, io.EOF) {
		return errors.New("the value is empty, not JSON")
	}
	return errors.New("the value is not valid JSON (at byte " + strconv.FormatInt(offset, 10) + ")")
}
