// Command vcosim serves the whitesky.cloud API simulator and prints a credentials Secret.
// See docs/vcosim.md.
package main

import (
	"os"

	"github.com/capx-io/capx/internal/vco/vcosim"
)

func main() {
	os.Exit(vcosim.Main(os.Args[1:], os.Stdout, os.Stderr))
}
