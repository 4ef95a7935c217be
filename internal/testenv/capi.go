package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// capiWebhooks has envtest install CAPI's webhook configurations pointing at a local port with
// generated certificates, where the CAPI core manager started by startCAPI serves them (its
// webhook server cannot be disabled).
func capiWebhooks(capiDir string) envtest.WebhookInstallOptions {
	return envtest.WebhookInstallOptions{
		Paths:            []string{filepath.Join(capiDir, "core", "config", "webhook", "manifests.yaml")},
		LocalServingHost: "127.0.0.1",
	}
}

// startCAPI runs Cluster API's core manager (bin/capi-manager, built by hack/toolchain.sh) against
// the test API server, so Clusters and Machines are reconciled by CAPI's own controllers: the
// Cluster takes its endpoint from the InfraCluster and Machines their provider IDs from their
// InfraMachines.
func (e *Env) startCAPI() error {
	bin := filepath.Join(e.Root, "bin", "capi-manager")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s not found: run `make toolchain` (it builds the CAPI core manager once per machine)", bin)
	}
	w := e.env.WebhookInstallOptions
	e.capi = exec.Command(bin,
		"--leader-elect=false",
		"--webhook-port="+strconv.Itoa(w.LocalServingPort),
		"--webhook-cert-dir="+w.LocalServingCertDir,
		"--health-addr=127.0.0.1:0",
		"--diagnostics-address=127.0.0.1:0",
		"--insecure-diagnostics",
		"--v=2",
	)
	e.capi.Env = append(os.Environ(), "KUBECONFIG="+e.KubeconfigPath)
	e.capi.Stdout, e.capi.Stderr = &e.capiLog, &e.capiLog
	if err := e.capi.Start(); err != nil {
		return fmt.Errorf("start the CAPI core manager: %w", err)
	}
	return nil
}

// CAPILog returns what the CAPI core manager printed, for failing tests.
func (e *Env) CAPILog() string { return e.capiLog.String() }
