// Command standinplugin is the image the vcohost tests put in place of NVIDIA's device plugin
// (the manager's --capvco-addon-image nvidia-device-plugin=...): on machines without a GPU it
// runs the GPU add-on's DaemonSet as delivered, serves stand-in devices under the add-on's
// resource (internal/capvco/gpuaddon/standin) and registers them through the kubelet socket in
// the DaemonSet's device-plugins volume, as NVIDIA's plugin does. Like NVIDIA's plugin it must
// register again when the kubelet restarts (the kubelet then recreates its socket and removes
// the plugins' ones): it exits, and the container's restart registers anew.
//
// It takes no arguments, since the add-on's DaemonSet passes none.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/capx-io/capx/internal/capvco/gpuaddon"
	"github.com/capx-io/capx/internal/capvco/gpuaddon/standin"
)

// devices is how many stand-in GPUs a node advertises.
const devices = 2

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "standinplugin:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	dir := pluginapi.DevicePluginPath
	kubelet := filepath.Join(dir, filepath.Base(pluginapi.KubeletSocket))
	before, err := os.Stat(kubelet)
	if err != nil {
		return fmt.Errorf("the kubelet's device plugin socket: %w", err)
	}
	regCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	p, err := standin.Start(regCtx, dir, gpuaddon.ResourceName, devices)
	cancel()
	if err != nil {
		return fmt.Errorf("registering with %s: %w", kubelet, err)
	}
	defer p.Stop()
	fmt.Printf("registered %d stand-in devices of %s with %s\n", devices, gpuaddon.ResourceName, kubelet)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		now, err := os.Stat(kubelet)
		if err != nil || !os.SameFile(before, now) {
			return fmt.Errorf("the kubelet's socket %s was recreated (the kubelet restarted): exiting to register again", kubelet)
		}
	}
}
