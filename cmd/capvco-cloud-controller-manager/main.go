// Command capvco-cloud-controller-manager is the cloud controller manager of CAPVCO workload
// clusters: internal/capvco/ccm.
package main

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric

	"github.com/capx-io/capx/internal/capvco/ccm"
)

func main() {
	cmd, err := ccm.NewCommand(wait.NeverStop)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(cli.Run(cmd))
}
