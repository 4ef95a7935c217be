package standin

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/capx-io/capx/internal/capvco/gpuaddon"
)

// registry stands in for the kubelet's device manager on the registration side: it refuses
// what the kubelet refuses (another API version, a resource that is not an extended resource
// name) and then talks to the plugin as the kubelet does.
type registry struct {
	pluginapi.UnimplementedRegistrationServer
	dir string
	got chan *pluginapi.RegisterRequest
}

func (r *registry) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if req.Version != pluginapi.Version {
		return nil, fmt.Errorf("unsupported device plugin API version %q", req.Version)
	}
	domain, name, ok := strings.Cut(req.ResourceName, "/")
	if !ok || len(validation.IsQualifiedName(req.ResourceName)) > 0 || name == "" || domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") {
		return nil, fmt.Errorf("invalid extended resource name %q", req.ResourceName)
	}
	r.got <- req
	return &pluginapi.Empty{}, nil
}

// TestRegistersTheAddonsResource: the stand-in registers the add-on's resource with a
// registration server that checks what the kubelet checks, which then lists its devices and
// allocates one. This is the device plugin API end to end without a kubelet; TestRealKubelet
// (-tags e2e) registers with a real one.
func TestRegistersTheAddonsResource(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	reg := &registry{dir: dir, got: make(chan *pluginapi.RegisterRequest, 1)}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, reg)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	ctx := context.Background()
	if _, err := Start(ctx, dir, "gpu", 1); err == nil {
		t.Fatal("a resource name the kubelet refuses was registered")
	}
	p, err := Start(ctx, dir, gpuaddon.ResourceName, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	var req *pluginapi.RegisterRequest
	select {
	case req = <-reg.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no registration")
	}
	if req.ResourceName != gpuaddon.ResourceName {
		t.Fatalf("registered %q, want %q", req.ResourceName, gpuaddon.ResourceName)
	}

	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, req.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pluginapi.NewDevicePluginClient(conn)
	if _, err := c.GetDevicePluginOptions(ctx, &pluginapi.Empty{}); err != nil {
		t.Fatal(err)
	}
	stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := stream.Recv()
	if err != nil || len(list.Devices) != 2 || list.Devices[0].Health != pluginapi.Healthy {
		t.Fatalf("devices = %v, %v", list, err)
	}
	resp, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{list.Devices[1].ID}}}})
	if err != nil || resp.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"] != list.Devices[1].ID {
		t.Fatalf("allocate = %v, %v", resp, err)
	}
	if got := p.Allocated(); len(got) != 1 || got[0][0] != list.Devices[1].ID {
		t.Errorf("allocations = %v", got)
	}
}

// TestWatchedRegistration: found in a plugin registry directory, the stand-in tells the
// kubelet's plugin watcher it is a device plugin for the add-on's resource on the socket it
// was found on, and keeps what the kubelet answers.
func TestWatchedRegistration(t *testing.T) {
	dir := t.TempDir()
	p, err := StartWatched(dir, gpuaddon.ResourceName, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	if _, _, told := p.Registration(); told {
		t.Fatal("registered before the kubelet said so")
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("registry directory holds %v, %v", entries, err)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, entries[0].Name()), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	info, err := registerapi.NewRegistrationClient(conn).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.DevicePlugin || info.Name != gpuaddon.ResourceName || info.Endpoint != "" || !slices.Equal(info.SupportedVersions, []string{pluginapi.Version}) {
		t.Fatalf("plugin info %v", info)
	}
	// The device plugin service is on the same socket.
	if _, err := pluginapi.NewDevicePluginClient(conn).GetDevicePluginOptions(ctx, &pluginapi.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := registerapi.NewRegistrationClient(conn).NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: "refused"}); err != nil {
		t.Fatal(err)
	}
	if ok, failure, told := p.Registration(); !told || ok || failure != "refused" {
		t.Errorf("registration = %v %q %v", ok, failure, told)
	}
}
