package vco

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// The swagger types some fields inconsistently (cloudspace_id is an integer in the VM list
// model and a string elsewhere; DNS weights are strings in one list and integers in the
// other). These decoders accept either, so a model fix on the platform breaks nothing.

// flexString decodes a JSON string or number as a string.
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*f = ""
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexString(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want a string or a number, got %s", jsonKind(b)) // never the value: it may be anything
	}
	*f = flexString(n.String())
	return nil
}

// flexInt decodes a JSON number or numeric string as an int; null and "" are 0.
type flexInt int

func (f *flexInt) UnmarshalJSON(b []byte) error {
	var s flexString
	if err := s.UnmarshalJSON(b); err != nil {
		return err
	}
	if s == "" {
		*f = 0
		return nil
	}
	n, err := strconv.ParseFloat(string(s), 64)
	if err != nil {
		return fmt.Errorf("want an integer, got a string of %d bytes that is not a number", len(s))
	}
	*f = flexInt(n)
	return nil
}

// jsonKind names the kind of a JSON value from its first byte.
func jsonKind(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	}
	return "something else"
}
