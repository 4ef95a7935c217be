package vcosim

// VMHost is told when a VM starts running, stops, or is gone for good, so that a test harness
// can play the VM: on the platform a VM boots its image with its user data, and the simulator
// has nothing to run. The simulator calls it with its lock held, after the VM's state changed
// and before the call answers; an implementation must return at once and do the work in the
// background, as a real VM boots after the API has answered. It must not call the simulator
// from within these methods (the lock is held).
type VMHost interface {
	// Running: the VM runs now (created with start_vm, or started after a stop).
	Running(vm VMBoot)
	// Stopped: the VM is halted, or in the recycle bin; its disks stay.
	Stopped(vmID int)
	// Destroyed: the VM is gone for good, and with it its boot disk.
	Destroyed(vmID int)
}

// VMBoot is what a VM boots with: its identity, its place on the cloudspace network and the
// user data cloud-init would read.
type VMBoot struct {
	ID           int
	Name         string
	Hostname     string
	CloudspaceID string
	Location     string
	// Network is the cloudspace's private network (a CIDR); PrivateIP is the VM's address in it.
	Network   string
	PrivateIP string
	MAC       string
	UserData  string
	VCPUs     int
	MemoryMiB int
}

// SetVMHost installs the harness that plays VMs (nil removes it). VMs that run already are
// not announced: install it before the first VM is created.
func (s *Sim) SetVMHost(h VMHost) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vmHost = h
}

// vmRunning tells the harness that vm runs now; callers hold s.mu.
func (s *Sim) vmRunning(vm *VM) {
	if s.vmHost == nil {
		return
	}
	cs := s.st.Cloudspaces[vm.CloudspaceID]
	s.vmHost.Running(VMBoot{
		ID: vm.ID, Name: vm.Name, Hostname: vm.Hostname, CloudspaceID: vm.CloudspaceID, Location: cs.Location,
		Network: cs.PrivateNetwork, PrivateIP: vm.PrivateIP, MAC: vm.MAC, UserData: vm.UserData,
		VCPUs: vm.VCPUs, MemoryMiB: vm.MemoryMiB,
	})
}

// vmStopped tells the harness that vm no longer runs; callers hold s.mu.
func (s *Sim) vmStopped(vm *VM) {
	if s.vmHost != nil {
		s.vmHost.Stopped(vm.ID)
	}
}

// vmDestroyed tells the harness that vm is gone for good; callers hold s.mu.
func (s *Sim) vmDestroyed(vm *VM) {
	if s.vmHost != nil {
		s.vmHost.Destroyed(vm.ID)
	}
}
