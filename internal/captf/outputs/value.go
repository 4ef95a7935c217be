package outputs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// value is a JSON value with its kind known. Decoding goes through value instead of straight
// into structs so that every message can say which kind was found where, and never quote the
// value (encoding/json's type errors can include a number's text).
type value struct {
	raw  json.RawMessage
	kind string // "null", "string", "number", "bool", "list" or "object"
}

func parse(raw []byte) (value, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return value{raw: json.RawMessage("null"), kind: "null"}, nil
	}
	if !json.Valid(raw) {
		return value{}, errors.New("not valid JSON")
	}
	return value{raw: raw, kind: kindOf(raw[0])}, nil
}

func kindOf(first byte) string {
	switch first {
	case 'n':
		return "null"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case '[':
		return "list"
	case '{':
		return "object"
	}
	return "number"
}

func (v value) isNull() bool { return v.kind == "null" }

// expected says what a value at path should have been; path is relative to the output,
// e.g. "[2].type", and empty for the output itself.
func expected(path, want string, v value) error {
	if v.kind == "" {
		return fmt.Errorf("%sis missing; it must be %s", at(path), want)
	}
	found := "a " + v.kind
	if v.kind == "null" || v.kind == "object" {
		found = map[string]string{"null": "null", "object": "an object"}[v.kind]
	}
	return fmt.Errorf("%smust be %s, not %s", at(path), want, found)
}

// object returns the fields of an object value.
func (v value) object(path, want string) (map[string]value, error) {
	if v.kind != "object" {
		return nil, expected(path, want, v)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(v.raw, &fields); err != nil {
		return nil, expected(path, want, v)
	}
	out := make(map[string]value, len(fields))
	for k, raw := range fields {
		out[k], _ = parse(raw) // already validated as part of v
	}
	return out, nil
}

// list returns the items of a list value.
func (v value) list(path, want string) ([]value, error) {
	if v.kind != "list" {
		return nil, expected(path, want, v)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v.raw, &items); err != nil {
		return nil, expected(path, want, v)
	}
	out := make([]value, len(items))
	for i, raw := range items {
		out[i], _ = parse(raw)
	}
	return out, nil
}

func (v value) string(path string, maxLen int) (string, error) {
	if v.kind != "string" {
		return "", expected(path, "a string", v)
	}
	var s string
	if err := json.Unmarshal(v.raw, &s); err != nil {
		return "", expected(path, "a string", v)
	}
	if len(s) > maxLen {
		return "", fmt.Errorf("%sis longer than %d bytes", at(path), maxLen)
	}
	return s, nil
}

// optionalString decodes a string that may be null (or missing, the zero value) into dst.
func (v value) optionalString(dst *string, path string, maxLen int) error {
	if v.kind == "" || v.isNull() {
		*dst = ""
		return nil
	}
	s, err := v.string(path, maxLen)
	if err != nil {
		return fmt.Errorf("%w (or null)", err)
	}
	*dst = s
	return nil
}

func (v value) bool(path string) (bool, error) {
	switch string(v.raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, expected(path, "true or false", v)
}

// int32 decodes a whole number from 0 to MaxInt32. OpenTofu writes whole numbers without a
// fraction, but a computed one may come out as 3.0 or 3e0, which is still whole.
func (v value) int32(path string) (int32, error) {
	const want = "a whole number from 0 to 2147483647"
	if v.kind != "number" {
		return 0, expected(path, want, v)
	}
	if n, err := strconv.ParseInt(string(v.raw), 10, 32); err == nil && n >= 0 {
		return int32(n), nil
	}
	f, err := strconv.ParseFloat(string(v.raw), 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
		return 0, fmt.Errorf("%smust be %s", at(path), want)
	}
	return int32(f), nil
}

// at prefixes a message about the value at path ("" for the output itself).
func at(path string) string {
	if path == "" {
		return ""
	}
	return "at " + path + " "
}
