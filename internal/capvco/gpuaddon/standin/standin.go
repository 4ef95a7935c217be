// Package standin is a device plugin for machines without a GPU: it advertises GPUs it does not
// have under the resource the GPU add-on's device plugin advertises and registers them with a
// kubelet, speaking the kubelet's device plugin API (v1beta1). Tests use it where NVIDIA's
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
)

// Plugin is a running stand-in.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	resource string
	devices  []*pluginapi.Device
	socket   string
	srv      *grpc.Server

	mu        sync.Mutex
	allocated [][]string
}

// Start serves count devices of resource on a socket in dir and registers them with the
// kubelet socket in the same directory (pluginapi.DevicePluginPath on a node).
func Start(ctx context.Context, dir, resource string, count int) (*Plugin, error) {
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
	go func() { _ = p.srv.Serve(ln) }()
	if err := p.register(ctx, filepath.Join(dir, filepath.Base(pluginapi.KubeletSocket))); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
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
