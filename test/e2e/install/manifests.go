package install

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Manifest is a list of objects, as a multi-document YAML file holds them.
type Manifest []*unstructured.Unstructured

// ParseManifest reads a multi-document YAML file; empty documents are skipped.
func ParseManifest(b []byte) (Manifest, error) {
	var m Manifest
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return nil, err
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("manifest document %d: %w", len(m)+1, err)
		}
		if len(obj) == 0 {
			continue
		}
		m = append(m, &unstructured.Unstructured{Object: obj})
	}
}

// YAML writes the objects as one multi-document file.
func (m Manifest) YAML() ([]byte, error) {
	var b bytes.Buffer
	for i, o := range m {
		if i > 0 {
			b.WriteString("---\n")
		}
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}

// Without drops the objects of the given kinds.
func (m Manifest) Without(kinds ...string) Manifest {
	var out Manifest
	for _, o := range m {
		drop := false
		for _, k := range kinds {
			drop = drop || o.GetKind() == k
		}
		if !drop {
			out = append(out, o)
		}
	}
	return out
}

// Kustomize renders a kustomize folder with bin/kubectl kustomize.
func Kustomize(ctx context.Context, kubectl, dir string) (Manifest, error) {
	out, err := runIn(ctx, nil, nil, kubectl, "kustomize", dir)
	if err != nil {
		return nil, err
	}
	return ParseManifest(out)
}

// variableRE matches clusterctl's variables: ${NAME} and ${NAME:=default}.
var variableRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:=([^}]*))?\}`)

// SubstituteDefaults does what clusterctl does to a components file whose variables all have
// defaults: ${NAME:=default} becomes the value from vars, else the default. A variable without a
// default and without a value is an error, as in clusterctl.
func SubstituteDefaults(b []byte, vars map[string]string) ([]byte, error) {
	var missing []string
	out := variableRE.ReplaceAllFunc(b, func(v []byte) []byte {
		sub := variableRE.FindSubmatch(v)
		if val, ok := vars[string(sub[1])]; ok {
			return []byte(val)
		}
		if len(sub[2]) > 0 {
			return sub[3]
		}
		missing = append(missing, string(sub[1]))
		return v
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("variables without a value or default: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// runIn runs a command with stdin (may be nil) and extra environment, and returns its stdout;
// the error carries its stderr.
func runIn(ctx context.Context, stdin []byte, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
