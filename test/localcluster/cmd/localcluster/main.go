// Command localcluster runs local single-node management clusters for development and e2e tests
// (up, down, status, logs, kubeconfig). hack/cluster builds and runs it; see docs/local-cluster.md.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
