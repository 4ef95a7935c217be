// Package csi is capvco-csi-driver: the Container Storage Interface driver for whitesky.cloud
// disks in CAPVCO clusters. The controller creates location-scoped disks, attaches them to the
// node's VM (PUBLISH_UNPUBLISH_VOLUME, so a Pod that moves waits for a clean detach instead of
// hanging on a disk the old node holds), grows, snapshots and clones them; the node plugin
// finds an attached disk by its serial, opens LUKS2 for encrypted volumes, formats it once and
// mounts it.
package csi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/capx-io/capx/internal/capvco/csi/config"
	"github.com/capx-io/capx/internal/version"
)

// DriverName is the CSI driver's name: the StorageClasses' provisioner.
const DriverName = "csi.capvco.io"

// TopologyLocation is the topology key: a disk attaches only to VMs of its location.
const TopologyLocation = "topology.csi.capvco.io/location"

// Driver serves the identity service and, depending on what it was built with, the
// controller service (Controller set) and the node service (Node set).
type Driver struct {
	Config     config.Config
	Controller *Controller
	Node       *Node
}

// Serve listens on endpoint (unix:///path or a path) until ctx ends.
func (d *Driver) Serve(ctx context.Context, endpoint string) error {
	path := strings.TrimPrefix(strings.TrimPrefix(endpoint, "unix://"), "unix:")
	if path == "" {
		return errors.New("--endpoint is empty: give the unix socket the sidecars talk to, e.g. unix:///csi/csi.sock")
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("endpoint %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("endpoint %s: %w", path, err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(logErrors))
	csipb.RegisterIdentityServer(srv, identity{d: d})
	if d.Controller != nil {
		csipb.RegisterControllerServer(srv, d.Controller)
	}
	if d.Node != nil {
		csipb.RegisterNodeServer(srv, d.Node)
	}
	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	klog.InfoS("serving", "endpoint", path, "controller", d.Controller != nil, "node", d.Node != nil)
	return srv.Serve(ln)
}

// logErrors logs failed calls by method and code; requests are not logged, since node-stage
// secrets and volume contexts travel in them.
func logErrors(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil {
		klog.ErrorS(err, "call failed", "method", info.FullMethod, "code", status.Code(err))
	}
	return resp, err
}

type identity struct {
	csipb.UnimplementedIdentityServer
	d *Driver
}

func (identity) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: DriverName, VendorVersion: version.Get().Version}, nil
}

func (i identity) GetPluginCapabilities(context.Context, *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	caps := []*csipb.PluginCapability{
		{Type: &csipb.PluginCapability_VolumeExpansion_{VolumeExpansion: &csipb.PluginCapability_VolumeExpansion{Type: csipb.PluginCapability_VolumeExpansion_ONLINE}}},
	}
	if i.d.Controller != nil {
		caps = append(caps,
			&csipb.PluginCapability{Type: &csipb.PluginCapability_Service_{Service: &csipb.PluginCapability_Service{Type: csipb.PluginCapability_Service_CONTROLLER_SERVICE}}},
			&csipb.PluginCapability{Type: &csipb.PluginCapability_Service_{Service: &csipb.PluginCapability_Service{Type: csipb.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS}}})
	}
	return &csipb.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

// Probe answers ready once the services it serves can work: the controller's credential is
// readable.
func (i identity) Probe(context.Context, *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	if i.d.Controller != nil {
		if _, err := i.d.Controller.Platform(); err != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "%v", err)
		}
	}
	return &csipb.ProbeResponse{}, nil
}

// locks serialises the operations on one volume or snapshot: a second call while one runs
// answers ABORTED, as the CSI spec asks, and the sidecar retries it.
type locks struct{ m sync.Map }

func (l *locks) try(key string) (func(), error) {
	mu, _ := l.m.LoadOrStore(key, &sync.Mutex{})
	if !mu.(*sync.Mutex).TryLock() {
		return nil, status.Errorf(codes.Aborted, "an operation on %s is in progress", clipID(key))
	}
	return mu.(*sync.Mutex).Unlock, nil
}
