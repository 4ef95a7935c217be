// Package vcohost plays the whitesky.cloud simulator's VMs and TCP load balancers on a platform
// network of test/localcluster: every VM the simulator runs boots as a real node
// (localcluster.Machine) from the user data it was created with, stops when the VM stops and
// is removed when the VM is gone for good, and the router carries each TCP load balancer's
// traffic from its front end to its pool's members at its target port, as the pool is now.
//
// Usage (root is required, as for every localcluster):
//
//	sim, _ := vcosim.New(vcosim.Options{})
//	p, _ := localcluster.UpPlatform(ctx, localcluster.PlatformOptions{
//		Public: []string{"203.0.113.0/24"}, Private: []string{"192.168.103.0/24"},
//		LoadBalancers: vcohost.LoadBalancers{Sim: sim}})
//	defer p.Down(context.Background())
//	sim.SetVMHost(vcohost.Machines{Platform: p}) // before the first VM is created
//
// The platform's public prefixes must hold the cloudspaces' external addresses (the seeded
// location nl-rmd-dc01-001 uses 203.0.113.0/24) and its private ones the cloudspaces'
// networks; a VM on another network fails to boot, and its MachineStatus says why.
package vcohost

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/capx-io/capx/internal/vco"
	"github.com/capx-io/capx/internal/vco/vcosim"
	"github.com/capx-io/capx/test/localcluster"
)

// Machines is the simulator's VMHost: each call only asks the platform and returns, as the
// simulator requires (it holds its lock while it calls).
type Machines struct {
	Platform *localcluster.Platform
}

var _ vcosim.VMHost = Machines{}

// Running boots the VM's machine from its user data.
func (m Machines) Running(vm vcosim.VMBoot) { m.Platform.Boot(Machine(vm)) }

// Stopped powers the machine off; its disk stays.
func (m Machines) Stopped(vmID int) { m.Platform.Stop(vmID) }

// Destroyed powers the machine off and removes its disk.
func (m Machines) Destroyed(vmID int) { m.Platform.Destroy(vmID) }

// Machine is what the platform boots for a VM: its id, hostname (else its name, as the
// platform does), private address and user data.
func Machine(vm vcosim.VMBoot) localcluster.Machine {
	host := vm.Hostname
	if host == "" {
		host = vm.Name
	}
	return localcluster.Machine{ID: vm.ID, Hostname: host, IP: vm.PrivateIP, UserData: vm.UserData}
}

// LoadBalancers reads the simulator's TCP load balancers for the platform's router.
type LoadBalancers struct {
	Sim *vcosim.Sim
}

var _ localcluster.LoadBalancers = LoadBalancers{}

// Fronts lists where the simulator's TCP load balancers listen. A front the simulator reports
// with an address that does not parse is left out (the router could not listen on it anyway).
func (l LoadBalancers) Fronts() []netip.AddrPort {
	var out []netip.AddrPort
	for _, f := range l.Sim.TCPLoadBalancerFronts() {
		if ap, err := netip.ParseAddrPort(f.String()); err == nil {
			out = append(out, ap)
		}
	}
	return out
}

// Backends lists the members the load balancer at front forwards to, as its pool is now.
func (l LoadBalancers) Backends(front netip.AddrPort) []string {
	b, _ := l.Sim.TCPLoadBalancerBackends(vcosim.LBFront{IP: front.Addr().String(), Port: int(front.Port())})
	return b
}

// DeleteCluster deletes the cloudspace's VMs permanently, then the cloudspace.
func DeleteCluster(ctx context.Context, vc *vco.Client, csID string) error {
	vms, err := vc.ListVMs(ctx, csID, true)
	if errors.Is(err, vco.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, vm := range vms {
		if err := vc.DeleteVM(ctx, csID, vm.ID, vco.DeleteVMOptions{Permanently: true}); err != nil && !errors.Is(err, vco.ErrNotFound) {
			return fmt.Errorf("deleting VM %d: %w", vm.ID, err)
		}
	}
	if err := vc.DeleteCloudspace(ctx, csID, true); err != nil && !errors.Is(err, vco.ErrNotFound) {
		return fmt.Errorf("deleting cloudspace %s: %w", csID, err)
	}
	return nil
}
