// Package standin is a device plugin for machines without a GPU: it advertises GPUs it does not
// have under the resource the GPU add-on's device plugin advertises and registers them with a
// kubelet, speaking the kubelet's device plugin API (v1beta1), through the kubelet's socket
// (Start, as NVIDIA's plugin does) or its plugin watcher (StartWatched). Tests use it where NVIDIA's
// plugin cannot run (no GPU, no NVML) to prove what happens on the kubelet's side: the
// registration, the node's capacity, a Pod's allocation. It proves nothing about NVIDIA's
// plugin itself.
package standin

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Plugin is a running stand-in.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	resource string
	devices  []*pluginapi.Device
	socket   string
	srv      *grpc.Server

	mu           sync.Mutex
	allocated    [][]string
	registration *registerapi.RegistrationStatus
}

// Start serves count devices of resource on a socket in dir and registers them with the
// kubelet socket in the same directory (pluginapi.DevicePluginPath on a node), as NVIDIA's
// plugin does.
func Start(ctx context.Context, dir, resource string, count int) (*Plugin, error) {
	p, err := serve(dir, resource, count)
	if err != nil {
		return nil, err
	}
	if err := p.register(ctx, filepath.Join(dir, filepath.Base(pluginapi.KubeletSocket))); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// StartWatched serves count devices of resource on a socket in the kubelet's plugin registry
// directory (<kubelet root-dir>/plugins_registry), where the kubelet's plugin watcher finds it
// and asks it what it is. This reaches exactly one kubelet, whatever its root directory, which
// the fixed /var/lib/kubelet/device-plugins that Start uses does not when several kubelets
// share a host. The kubelet talks to the devices the same way after either registration.
func StartWatched(registryDir, resource string, count int) (*Plugin, error) {
	return serve(registryDir, resource, count)
}

func serve(dir, resource string, count int) (*Plugin, error) {
	p := &Plugin{resource: resource, socket: filepath.Join(dir, fmt.Sprintf("capx-standin-%d.sock", os.Getpid()))}
	for i := range count {
		p.devices = append(p.devices, &pluginapi.Device{ID: fmt.Sprintf("standin-gpu-%d", i), Health: pluginapi.Healthy})
	}
	_ = os.Remove(p.socket)
	ln, err := net.Listen("unix", p.socket)
	if err != nil {
		return nil, err
	}
	p.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.srv, p)
	registerapi.RegisterRegistrationServer(p.srv, watcher{p: p})
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// watcher answers the kubelet's plugin watcher: a device plugin for the resource, served on
// the socket it was found on (no endpoint of its own).
type watcher struct {
	registerapi.UnimplementedRegistrationServer
	p *Plugin
}

func (w watcher) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.DevicePlugin, Name: w.p.resource, SupportedVersions: []string{pluginapi.Version}}, nil
}

func (w watcher) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	w.p.registration = s
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Registration is what the kubelet's plugin watcher said of the registration (StartWatched),
// nil before it said anything.
func (p *Plugin) Registration() (registered bool, failure string, told bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.registration == nil {
		return false, "", false
	}
	return p.registration.PluginRegistered, p.registration.Error, true
}

func (p *Plugin) register(ctx context.Context, kubelet string) error {
	conn, err := grpc.NewClient("unix://"+kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: filepath.Base(p.socket), ResourceName: p.resource,
	})
	if err != nil {
		return fmt.Errorf("register %s with the kubelet at %s: %w", p.resource, kubelet, err)
	}
	return nil
}

// Stop stops serving; the kubelet then marks the devices unhealthy.
func (p *Plugin) Stop() {
	p.srv.Stop()
	_ = os.Remove(p.socket)
}

// Allocated lists the device ids of every container allocation the kubelet asked for.
func (p *Plugin) Allocated() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.allocated)
}

// GetDevicePluginOptions: no pre-start hook, no preferred allocation.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the devices once and keeps the stream open, as a plugin whose devices
// never change does.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// Allocate answers what NVIDIA's plugin answers with its envvar strategy: the devices in
// NVIDIA_VISIBLE_DEVICES, which the nvidia runtime turns into device nodes.
func (p *Plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range req.ContainerRequests {
		p.allocated = append(p.allocated, slices.Clone(c.DevicesIds))
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(c.DevicesIds, ",")}})
	}
	return out, nil
}
