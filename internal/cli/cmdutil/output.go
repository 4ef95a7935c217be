package cmdutil

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// APIVersion versions the shape of every object the tools print as JSON or YAML. Within a
// version fields are only ever added; renaming or removing one makes a new version.
const APIVersion = "cli.capx.io/v1alpha1"

// TypeMeta starts every printed object, so scripts can tell what they read.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// Meta returns the TypeMeta of a printed object of the given kind.
func Meta(kind string) TypeMeta { return TypeMeta{APIVersion: APIVersion, Kind: kind} }

// Format is an output format chosen with -o.
type Format string

// The formats.
const (
	Text Format = "text"
	JSON Format = "json"
	YAML Format = "yaml"
)

type formatValue struct {
	p       *Format
	allowed []Format
}

func (v *formatValue) String() string { return string(*v.p) }
func (v *formatValue) Type() string   { return "format" }
func (v *formatValue) Set(s string) error {
	f := Format(strings.ToLower(s))
	if !slices.Contains(v.allowed, f) {
		return fmt.Errorf("unknown output format %q: use %s", s, joinFormats(v.allowed))
	}
	*v.p = f
	return nil
}

func joinFormats(fs []Format) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// AddOutputFlag adds -o/--output to cmd, defaulting to text. allowed limits the formats
// (default text, json, yaml); the flag completes them.
func AddOutputFlag(cmd *cobra.Command, p *Format, allowed ...Format) {
	if len(allowed) == 0 {
		allowed = []Format{Text, JSON, YAML}
	}
	*p = Text
	cmd.Flags().VarP(&formatValue{p: p, allowed: allowed}, "output", "o", "Output format: "+joinFormats(allowed)+".")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formatStrings(allowed), cobra.ShellCompDirectiveNoFileComp))
}

func formatStrings(fs []Format) []string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return s
}

// Print writes obj to w as JSON (indented) or YAML, or calls text for Text. obj should embed
// TypeMeta.
func Print(w io.Writer, format Format, obj any, text func() error) error {
	switch format {
	case JSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(obj)
	case YAML:
		b, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case Text, "":
		return text()
	}
	return fmt.Errorf("unknown output format %q", format)
}
