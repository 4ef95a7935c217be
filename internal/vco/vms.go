package vco

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

const (
	pathVMs = pathCloudspace + "/vms"
	pathVM  = pathVMs + "/{vm_id}"
)

var (
	opListVMs  = get("ListVMs", pathVMs)
	opCreateVM = post("CreateVM", pathVMs)
	opGetVM    = get("GetVM", pathVM)
	opDeleteVM = del("DeleteVM", pathVM)
	// Starting a running VM and stopping a halted one are no-ops, so both are safe to retry.
	opStartVM = postIdempotent("StartVM", pathVM+"/start")
	opStopVM  = postIdempotent("StopVM", pathVM+"/stop")
)

// VM is a virtual machine. List answers fill fewer fields than GetVM.
type VM struct {
	ID           int      `json:"vm_id"`
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Hostname     string   `json:"hostname"`
	Status       string   `json:"status"` // DEPLOYING, RUNNING, HALTED, PAUSED, ERROR, DELETED, ...
	CloudspaceID string   `json:"-"`
	ImageID      int      `json:"-"`
	VCPUs        int      `json:"vcpus"`
	MemoryMiB    int      `json:"memory"`
	StorageGiB   int      `json:"storage"`
	BootDiskID   int      `json:"-"`
	BootType     string   `json:"boot_type"`
	AgentStatus  string   `json:"agent_status"`
	Disks        []VMDisk `json:"-"`
	NICs         []NIC    `json:"network_interfaces"`
	Devices      []Device `json:"devices"`
	// AntiAffinityGroupIDs is set by GetVM.
	AntiAffinityGroupIDs []string `json:"anti_affinity_group_ids"`
	CreationTime         float64  `json:"creation_time"`
	UpdateTime           float64  `json:"update_time"`
}

// VMDisk is a disk as a VM sees it. List answers carry only ids.
type VMDisk struct {
	ID          int    `json:"disk_id"`
	Name        string `json:"disk_name"`
	Description string `json:"description"`
	SizeGiB     int    `json:"disk_size"`
	Type        string `json:"disk_type"` // BOOT, DATA
	Status      string `json:"status"`
}

// NIC is a network interface; the first one is on the cloudspace network.
type NIC struct {
	DeviceName string `json:"device_name"`
	MAC        string `json:"mac_address"`
	IP         string `json:"ip_address"`
	NetworkID  int    `json:"network_id"`
	Model      string `json:"model"`
	Type       string `json:"nic_type"`
}

// Device is an attached device; a vGPU shows up with type VGPU and its vgpu_id.
type Device struct {
	ReferenceID string `json:"reference_id"`
	Type        string `json:"type"`
	Description string `json:"description"`
}

// PrivateIP is the VM's address on its cloudspace network.
func (v VM) PrivateIP() string {
	for _, n := range v.NICs {
		if n.IP != "" {
			return n.IP
		}
	}
	return ""
}

// UnmarshalJSON copes with the two VM models: disks as ids (list) or objects (get), and
// cloudspace_id as an integer (list model) or a string (get model).
func (v *VM) UnmarshalJSON(b []byte) error {
	type plain VM
	var w struct {
		plain
		CloudspaceID flexString      `json:"cloudspace_id"`
		ImageID      flexInt         `json:"image_id"`
		BootDiskID   flexInt         `json:"boot_disk_id"`
		Disks        json.RawMessage `json:"disks"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*v = VM(w.plain)
	v.CloudspaceID, v.ImageID, v.BootDiskID = string(w.CloudspaceID), int(w.ImageID), int(w.BootDiskID)
	if len(w.Disks) == 0 || string(w.Disks) == "null" {
		return nil
	}
	var ids []int
	if err := json.Unmarshal(w.Disks, &ids); err == nil {
		for _, id := range ids {
			v.Disks = append(v.Disks, VMDisk{ID: id})
		}
		return nil
	}
	if err := json.Unmarshal(w.Disks, &v.Disks); err != nil {
		return fmt.Errorf("disks: %w", err)
	}
	return nil
}

// CreateVMRequest holds the create arguments; sizes carry their units in the names
// because the API mixes them (memory in MiB, disks in GiB).
type CreateVMRequest struct {
	Name        string
	Description string // required by the API; defaults to Name
	Hostname    string
	VCPUs       int
	MemoryMiB   int
	ImageID     int
	// BootDiskGiB defaults to the image's boot disk size.
	BootDiskGiB  int
	DataDisksGiB []int
	PrivateIP    string
	// UserData is the cloud-init user data. It travels in the request body (userDataBody),
	// never in the query string: a control plane's is tens of KiB. It is never logged.
	UserData    string
	Start       *bool // default true
	BootType    string
	EnableAgent *bool // default true
	// GPU reserves and attaches a vGPU in the same call.
	GPU *VMGPU
}

// VMGPU asks for a vGPU at VM create.
type VMGPU struct {
	ProfileID string
	Name      string
}

// CreateVM creates a VM and returns its id; the call blocks until the VM is deployed.
// Prefer EnsureVM, which finds a VM of the same name first.
func (c *Client) CreateVM(ctx context.Context, cloudspaceID string, req CreateVMRequest) (int, error) {
	if req.Name == "" || req.VCPUs <= 0 || req.MemoryMiB <= 0 {
		return 0, fmt.Errorf("vco: CreateVM: name, vcpus and memory (MiB) are required: %w", ErrBadRequest)
	}
	desc := req.Description
	if desc == "" {
		desc = req.Name
	}
	q := query{}.str("name", req.Name).str("description", desc).must("vcpus", req.VCPUs).must("memory", req.MemoryMiB).
		str("hostname", req.Hostname).int("image_id", req.ImageID).int("disk_size", req.BootDiskGiB).ints("data_disks", req.DataDisksGiB).
		str("private_ip", req.PrivateIP).optBool("start_vm", req.Start).str("boot_type", req.BootType).
		optBool("enable_vm_agent", req.EnableAgent)
	body := map[string]any{}
	if req.GPU != nil {
		body["gpu_id"], body["vgpu_name"] = req.GPU.ProfileID, req.GPU.Name
	}
	if key, v := userDataBody(req.UserData); key != "" {
		body[key] = v
	}
	var out struct {
		ID int `json:"vm_id"`
	}
	in := call{path: args(cloudspaceID), query: q.values()}
	if len(body) > 0 {
		in.body = body
	}
	if err := c.do(ctx, opCreateVM, in, &out); err != nil {
		return 0, err
	}
	return out.ID, nil
}

// userDataBody says how user data travels in the create body. The swagger's body model
// (VMCreateExtentions) declares only "userdata", an object: the cloud-config as JSON, which
// the platform writes out as #cloud-config YAML. A cloud-config whose YAML is a mapping goes
// there, also behind kubeadm's "## template: jinja" header when nothing in it is Jinja markup
// (the template then renders to itself). Everything else (Jinja markup, MIME multipart, a
// script, a boothook) cannot be an object without changing what cloud-init runs, so it goes as
// the string "user_data", the key the Pulumi provider sends to the platform; the swagger does
// not declare it (vco-api.md §2.2, gap 13). The query string is never used: front ends refuse
// request lines over 4-8 KiB, and a control plane's cloud-config is tens of KiB.
func userDataBody(ud string) (key string, value any) {
	if ud == "" {
		return "", nil
	}
	if obj, ok := cloudConfigObject(ud); ok {
		return "userdata", obj
	}
	return "user_data", ud
}

// cloudConfigObject is the JSON object of a cloud-config whose YAML is a non-empty mapping.
func cloudConfigObject(ud string) (json.RawMessage, bool) {
	first, rest, _ := strings.Cut(ud, "\n")
	if strings.TrimRight(first, " \t\r") == "## template: jinja" {
		if strings.Contains(rest, "{{") || strings.Contains(rest, "{%") || strings.Contains(rest, "{#") {
			return nil, false
		}
		first, rest, _ = strings.Cut(rest, "\n")
	}
	if strings.TrimRight(first, " \t\r") != "#cloud-config" {
		return nil, false
	}
	for _, line := range strings.Split(rest, "\n") {
		if l := strings.TrimRight(line, " \t\r"); l == "---" || strings.HasPrefix(l, "--- ") || l == "..." {
			return nil, false // a second YAML document, which the object would drop
		}
	}
	j, err := yaml.YAMLToJSON([]byte(rest))
	if err != nil || !bytes.HasPrefix(j, []byte("{")) || string(j) == "{}" {
		return nil, false
	}
	return j, true
}

// GetVM reads one VM with its disks, NICs and devices.
func (c *Client) GetVM(ctx context.Context, cloudspaceID string, id int) (VM, error) {
	var out VM
	err := c.do(ctx, opGetVM, call{path: args(cloudspaceID, itoa(id))}, &out)
	return out, err
}

// ListVMs lists the VMs of a cloudspace, recycle bin excluded unless includeDeleted.
func (c *Client) ListVMs(ctx context.Context, cloudspaceID string, includeDeleted bool) ([]VM, error) {
	q := query{}
	if includeDeleted {
		q.bool("include_deleted", true)
	}
	var out resultList[VM]
	err := c.do(ctx, opListVMs, call{path: args(cloudspaceID), query: q.values()}, &out)
	return out.Result, err
}

// StartVM starts a VM (a no-op when it runs).
func (c *Client) StartVM(ctx context.Context, cloudspaceID string, id int) error {
	return c.do(ctx, opStartVM, call{path: args(cloudspaceID, itoa(id))}, nil)
}

// StopVM stops a VM; force pulls the plug instead of an ACPI shutdown.
func (c *Client) StopVM(ctx context.Context, cloudspaceID string, id int, force bool) error {
	q := query{}
	if force {
		q.bool("force", true)
	}
	return c.do(ctx, opStopVM, call{path: args(cloudspaceID, itoa(id)), query: q.values()}, nil)
}

// DeleteVMOptions map to the delete arguments.
type DeleteVMOptions struct {
	// Permanently skips the recycle bin (where a VM is still billed).
	Permanently bool
	// DetachDisks keeps data disks (detached) instead of deleting them with the VM.
	DetachDisks bool
	// DetachGPU detaches attached vGPUs; without it the platform refuses to delete a VM
	// holding one. Detached reservations stay billed until released.
	DetachGPU bool
}

// DeleteVM deletes a VM.
func (c *Client) DeleteVM(ctx context.Context, cloudspaceID string, id int, opts DeleteVMOptions) error {
	q := query{}.bool("permanently", opts.Permanently).bool("detach_disks", opts.DetachDisks).bool("detach_gpu", opts.DetachGPU)
	return c.do(ctx, opDeleteVM, call{path: args(cloudspaceID, itoa(id)), query: q.values()}, nil)
}

// FindVM looks a VM up by name in a cloudspace: ErrNotFound when absent, ErrAmbiguous
// when the name is not unique (the platform allows duplicates).
func (c *Client) FindVM(ctx context.Context, cloudspaceID, name string) (VM, error) {
	vms, err := c.ListVMs(ctx, cloudspaceID, false)
	if err != nil {
		return VM{}, err
	}
	return unique(vms, name, "VM", func(v VM) (string, string) { return v.Name, fmt.Sprint(v.ID) })
}

// unique picks the one item with a name.
func unique[T any](items []T, name, kind string, key func(T) (name, id string)) (T, error) {
	var found []T
	var ids []string
	for _, it := range items {
		if n, id := key(it); n == name {
			found = append(found, it)
			ids = append(ids, id)
		}
	}
	var zero T
	switch len(found) {
	case 0:
		return zero, fmt.Errorf("vco: no %s named %q: %w", kind, name, ErrNotFound)
	case 1:
		return found[0], nil
	}
	return zero, fmt.Errorf("vco: %d %ss named %q (%s): %w", len(found), kind, name, strings.Join(ids, ", "), ErrAmbiguous)
}
