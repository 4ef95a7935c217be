// Package vcospec loads the real whitesky.cloud Swagger 2.0 description and checks HTTP
// exchanges against it. The conformance tests of the client and of the simulator use it so
// that neither can drift from the API they stand for.
//
// swagger.json is the file published in github.com/whitesky-cloud/paasctl (whitesky-api.json),
// byte for byte; see SOURCE.md. It is embedded so the tests need no path outside the module.
package vcospec

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

//go:embed swagger.json
var swaggerJSON []byte

// SHA256 is the digest of the embedded swagger.json; a test keeps the file unchanged.
const SHA256 = "01de762d6dda581d1ddd323fac455059bc3714642180a4da40f8147d5dc62a15"

// Spec is the parsed swagger: operations keyed by "METHOD /path/template".
type Spec struct {
	BasePath  string
	ops       map[string]*Operation
	templates []template
	defs      map[string]*Schema
}

// Operation is one method on one path template.
type Operation struct {
	Method    string
	Path      string
	ID        string
	Params    []Param
	Responses map[string]*Schema // status code -> schema (nil when the swagger gives none)
}

// Param is an operation parameter. Body parameters carry a Schema.
type Param struct {
	Name     string  `json:"name"`
	In       string  `json:"in"`
	Type     string  `json:"type"`
	Format   string  `json:"format"`
	Required bool    `json:"required"`
	Schema   *Schema `json:"schema"`
}

// Schema is the subset of a Swagger schema object the checks need.
type Schema struct {
	Ref                  string             `json:"$ref"`
	Type                 typeList           `json:"type"`
	Format               string             `json:"format"`
	Properties           map[string]*Schema `json:"properties"`
	Required             []string           `json:"required"`
	Items                *Schema            `json:"items"`
	AllOf                []*Schema          `json:"allOf"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	Enum                 []any              `json:"enum"`
}

// typeList is a schema type: one name, or (in one model of this swagger) a list of names.
type typeList []string

func (t *typeList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*t = typeList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*t = many
	return nil
}

type template struct {
	method   string
	segments []string
	key      string
}

// Load parses the embedded swagger.
func Load() (*Spec, error) {
	var raw struct {
		BasePath    string                                `json:"basePath"`
		Definitions map[string]*Schema                    `json:"definitions"`
		Paths       map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(swaggerJSON, &raw); err != nil {
		return nil, fmt.Errorf("parsing embedded swagger: %w", err)
	}
	s := &Spec{BasePath: raw.BasePath, ops: map[string]*Operation{}, defs: raw.Definitions}
	for path, item := range raw.Paths {
		var shared []Param
		if p, ok := item["parameters"]; ok {
			if err := json.Unmarshal(p, &shared); err != nil {
				return nil, fmt.Errorf("parsing parameters of %s: %w", path, err)
			}
		}
		for method, body := range item {
			if method == "parameters" {
				continue
			}
			var op struct {
				OperationID string  `json:"operationId"`
				Parameters  []Param `json:"parameters"`
				Responses   map[string]struct {
					Schema *Schema `json:"schema"`
				} `json:"responses"`
			}
			if err := json.Unmarshal(body, &op); err != nil {
				return nil, fmt.Errorf("parsing %s %s: %w", method, path, err)
			}
			o := &Operation{
				Method: strings.ToUpper(method), Path: path, ID: op.OperationID,
				Params: append(append([]Param(nil), shared...), op.Parameters...), Responses: map[string]*Schema{},
			}
			for code, r := range op.Responses {
				o.Responses[code] = r.Schema
			}
			key := o.Method + " " + path
			s.ops[key] = o
			s.templates = append(s.templates, template{method: o.Method, segments: strings.Split(strings.Trim(path, "/"), "/"), key: key})
		}
	}
	// Literal segments must win over parameters (…/cloudspaces/available-subnets over
	// …/cloudspaces/{cloudspace_id}); sorting by "fewest parameters first" gives that.
	sort.Slice(s.templates, func(i, j int) bool {
		pi, pj := paramCount(s.templates[i].segments), paramCount(s.templates[j].segments)
		if pi != pj {
			return pi < pj
		}
		return s.templates[i].key < s.templates[j].key
	})
	return s, nil
}

func paramCount(segs []string) int {
	n := 0
	for _, s := range segs {
		if isParam(s) {
			n++
		}
	}
	return n
}

func isParam(seg string) bool { return strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") }

// Operation returns the operation for a method and a path template.
func (s *Spec) Operation(method, path string) (*Operation, bool) {
	o, ok := s.ops[strings.ToUpper(method)+" "+path]
	return o, ok
}

// Operations lists every operation key ("METHOD /path"), sorted.
func (s *Spec) Operations() []string {
	keys := make([]string, 0, len(s.ops))
	for k := range s.ops {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Match finds the operation serving a concrete path (without the base path) and returns the
// path parameter values.
func (s *Spec) Match(method, path string) (*Operation, map[string]string, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	method = strings.ToUpper(method)
	for _, t := range s.templates {
		if t.method != method || len(t.segments) != len(segs) {
			continue
		}
		vals := map[string]string{}
		ok := true
		for i, ts := range t.segments {
			if isParam(ts) {
				vals[strings.Trim(ts, "{}")] = segs[i]
				continue
			}
			if ts != segs[i] {
				ok = false
				break
			}
		}
		if ok {
			return s.ops[t.key], vals, true
		}
	}
	return nil, nil, false
}

// Param returns the named parameter of an operation.
func (o *Operation) Param(name string) (Param, bool) {
	for _, p := range o.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// Body returns the body parameter, if the operation takes one.
func (o *Operation) Body() (Param, bool) {
	for _, p := range o.Params {
		if p.In == "body" {
			return p, true
		}
	}
	return Param{}, false
}

// resolve follows $ref and merges allOf into one object schema.
func (s *Spec) resolve(sch *Schema) *Schema {
	for depth := 0; sch != nil && depth < 32; depth++ {
		if sch.Ref != "" {
			sch = s.defs[strings.TrimPrefix(sch.Ref, "#/definitions/")]
			continue
		}
		if len(sch.AllOf) > 0 {
			merged := &Schema{Type: typeList{"object"}, Properties: map[string]*Schema{}}
			for _, part := range sch.AllOf {
				p := s.resolve(part)
				if p == nil {
					continue
				}
				for k, v := range p.Properties {
					merged.Properties[k] = v
				}
				merged.Required = append(merged.Required, p.Required...)
			}
			return merged
		}
		return sch
	}
	return sch
}

// Violation is one disagreement between an exchange and the swagger.
type Violation struct {
	Op     string // "METHOD /template", or the concrete request when no operation matched
	Where  string // e.g. "query.permanently", "response.result[].cloudspace_id"
	Kind   string // see the Kind* constants
	Detail string
}

// Kinds of violations.
const (
	KindUnknownRoute  = "unknown-route"
	KindUnknownParam  = "unknown-param"
	KindParamLocation = "param-location"
	KindMissingParam  = "missing-param"
	KindUnknownField  = "unknown-field"
	KindMissingField  = "missing-field"
	KindType          = "type"
	KindStatus        = "status"
	KindBody          = "body"
)

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s: %s: %s", v.Op, v.Where, v.Kind, v.Detail)
}

// checkValue compares a JSON value (decoded with UseNumber) with a schema. strict also reports
// declared fields that are absent, because Flask-RESTX marshalling emits every declared field
// (null when unset) and the simulator promises to do the same.
func (s *Spec) checkValue(op, where string, sch *Schema, v any, strict bool, out *[]Violation) {
	sch = s.resolve(sch)
	if sch == nil || v == nil {
		return // no schema: anything goes; null: every field is nullable in Flask-RESTX output
	}
	add := func(kind, detail string) {
		*out = append(*out, Violation{Op: op, Where: where, Kind: kind, Detail: detail})
	}
	if len(sch.Type) > 1 {
		// Any of several types: the value conforms when one of them accepts it.
		for _, t := range sch.Type {
			alt := *sch
			alt.Type = typeList{t}
			var probe []Violation
			s.checkValue(op, where, &alt, v, strict, &probe)
			if len(probe) == 0 {
				return
			}
		}
		add(KindType, fmt.Sprintf("want one of %v, got %s", []string(sch.Type), jsonKind(v)))
		return
	}
	typ := ""
	if len(sch.Type) == 1 {
		typ = sch.Type[0]
	}
	if typ == "" && sch.Properties != nil {
		typ = "object"
	}
	switch typ {
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			add(KindType, fmt.Sprintf("want integer, got %s", jsonKind(v)))
			return
		}
		if _, err := strconv.ParseInt(n.String(), 10, 64); err != nil {
			add(KindType, fmt.Sprintf("want integer, got %s", n))
		}
	case "number":
		if _, ok := v.(json.Number); !ok {
			add(KindType, fmt.Sprintf("want number, got %s", jsonKind(v)))
		}
	case "string":
		if _, ok := v.(string); !ok {
			add(KindType, fmt.Sprintf("want string, got %s", jsonKind(v)))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			add(KindType, fmt.Sprintf("want boolean, got %s", jsonKind(v)))
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			add(KindType, fmt.Sprintf("want array, got %s", jsonKind(v)))
			return
		}
		for _, e := range arr {
			s.checkValue(op, where+"[]", sch.Items, e, strict, out)
		}
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			add(KindType, fmt.Sprintf("want object, got %s", jsonKind(v)))
			return
		}
		if len(sch.Properties) == 0 {
			return // free-form object
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p, ok := sch.Properties[k]
			if !ok {
				*out = append(*out, Violation{Op: op, Where: join(where, k), Kind: KindUnknownField, Detail: "not declared in the swagger model"})
				continue
			}
			s.checkValue(op, join(where, k), p, obj[k], strict, out)
		}
		required := map[string]bool{}
		for _, r := range sch.Required {
			required[r] = true
		}
		for k := range sch.Properties {
			if _, ok := obj[k]; !ok && (strict || required[k]) {
				*out = append(*out, Violation{Op: op, Where: join(where, k), Kind: KindMissingField, Detail: "declared field absent"})
			}
		}
	}
}

func join(where, key string) string {
	if where == "" {
		return key
	}
	return where + "." + key
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
