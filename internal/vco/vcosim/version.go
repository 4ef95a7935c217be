package vcosim

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"

	"github.com/capx-io/capx/internal/version"
)

// versionMain is `vcosim version [-o text|json|yaml]`: the build's identity, as every released
// binary prints it. It serves nothing.
func versionMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vcosim version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	output := fs.String("o", "text", "output format: text, json or yaml")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "vcosim version: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	info := struct {
		Binary string       `json:"binary"`
		Build  version.Info `json:"build"`
	}{"vcosim", version.Get()}
	var err error
	switch *output {
	case "text":
		_, err = fmt.Fprintf(stdout, "vcosim %s\n", info.Build)
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(info)
	case "yaml":
		var b []byte
		if b, err = yaml.Marshal(info); err == nil {
			_, err = stdout.Write(b)
		}
	default:
		fmt.Fprintf(stderr, "vcosim version: -o %q: give text, json or yaml\n", *output)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "vcosim version:", err)
		return 1
	}
	return 0
}
