// Command quickstart brings up a local management cluster with Cluster API core, the capx
// providers, the whitesky.cloud simulator and sample clusters, and takes it down again (up,
// down, images, status). hack/quickstart.sh builds and runs it; see docs/quickstart.md.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
