package csi_test

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capx-io/capx/internal/capvco/csi"
	"github.com/capx-io/capx/internal/capvco/csi/config"
	"github.com/capx-io/capx/internal/capvco/csi/luks"
	"github.com/capx-io/capx/internal/vco/vcosim"
)

var mountRW = []*csipb.VolumeCapability{{AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: "ext4"}},
	AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}}

// TestEncryptedVolume: an encrypted StorageClass gets a volume whose key the transit engine
// made and only the wrapped form of which is kept (in the disk's marker and the volume
// context); the node formats the disk as LUKS2 with that key and keeps the wrapped key in the
// LUKS2 header, so the raw device holds no file system a reader could mount.
func TestEncryptedVolume(t *testing.T) {
	c := newCluster(t, "worker-0")
	ctrl := c.controller(t)
	ctx := context.Background()
	resp, err := ctrl.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: "pvc-enc", VolumeCapabilities: mountRW,
		CapacityRange: &csipb.CapacityRange{RequiredBytes: 1 << 30}, Parameters: map[string]string{csi.ParamEncrypted: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	vol := resp.GetVolume()
	wrapped := vol.GetVolumeContext()["csi.capvco.io/wrapped-key"]
	if vol.GetVolumeContext()["csi.capvco.io/encrypted"] != "true" || !strings.HasPrefix(wrapped, "vault:v1:") {
		t.Fatalf("volume context = %v", vol.GetVolumeContext())
	}
	if calls := c.transit.Calls(); !slices.Equal(calls, []string{"datakey/plaintext/" + transitKey}) {
		t.Errorf("transit calls = %v", calls)
	}
	snap := c.sim.Snapshot()
	i := slices.IndexFunc(snap.Disks, func(d *vcosim.Disk) bool { return d.Name == "pvc-enc" })
	if i < 0 || !strings.Contains(snap.Disks[i].Description, "key="+wrapped) {
		t.Fatalf("the disk does not carry the wrapped key: %+v", snap.Disks)
	}
	diskID := snap.Disks[i].ID

	// A clone keeps its source's key; asking for a plain clone of it is refused.
	snapResp, err := ctrl.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{Name: "snap-enc", SourceVolumeId: vol.GetVolumeId()})
	if err != nil {
		t.Fatal(err)
	}
	src := &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: snapResp.GetSnapshot().GetSnapshotId()}}}
	if _, err := ctrl.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: "pvc-plain-clone", VolumeCapabilities: mountRW, VolumeContentSource: src}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a plain clone of an encrypted volume: %v", err)
	}
	clone, err := ctrl.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: "pvc-enc-clone", VolumeCapabilities: mountRW, VolumeContentSource: src,
		Parameters: map[string]string{csi.ParamEncrypted: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	if clone.GetVolume().GetVolumeContext()["csi.capvco.io/wrapped-key"] != wrapped {
		t.Errorf("the clone has another key than its source")
	}

	// The node side: attach, then stage.
	node := c.node(t, "worker-0")
	info, _ := node.NodeGetInfo(ctx, &csipb.NodeGetInfoRequest{})
	pub, err := ctrl.ControllerPublishVolume(ctx, &csipb.ControllerPublishVolumeRequest{VolumeId: vol.GetVolumeId(), NodeId: info.GetNodeId(), VolumeCapability: mountRW[0]})
	if err != nil {
		t.Fatal(err)
	}
	_, err = node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: vol.GetVolumeId(), PublishContext: pub.GetPublishContext(),
		StagingTargetPath: t.TempDir() + "/staging", VolumeCapability: mountRW[0], VolumeContext: vol.GetVolumeContext()})
	if err := (luks.Cryptsetup{}).Check(); err != nil {
		// This kernel cannot map devices: staging must say so, and the rest of the format path
		// is checked directly on the attached loop device.
		if status.Code(err) == codes.OK || !strings.Contains(err.Error(), "device mapper") {
			t.Fatalf("no device mapper, and stage answered %v", err)
		}
		t.Logf("dm-crypt is not available here (%v): checking LUKS2 format and the header token without opening the volume", err)
		loop := c.loops.Loop(diskID)
		key, err := ctrlKeys(t, c.cfg).Unwrap(ctx, wrapped)
		if err != nil {
			t.Fatal(err)
		}
		cs := luks.Cryptsetup{}
		if err := cs.Format(ctx, loop, key, wrapped); err != nil {
			t.Fatal(err)
		}
		if ok, err := cs.IsLUKS(ctx, loop); !ok || err != nil {
			t.Fatalf("not LUKS after format: %v", err)
		}
		if got, err := cs.WrappedKey(ctx, loop); err != nil || got != wrapped {
			t.Fatalf("header token = %q, %v", got, err)
		}
		raw, err := os.ReadFile(c.loops.DiskFile(diskID))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(raw, []byte("LUKS\xba\xbe")) || bytes.Contains(raw, key) {
			t.Fatal("the raw disk is not a LUKS2 volume, or holds the key in the clear")
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Fatal("dm-crypt is available: extend this test to write through the mapping and read the raw device")
}

func ctrlKeys(t *testing.T, cfg config.Config) csi.KeyWrapper {
	k, err := csi.Keys(cfg.Encryption)
	if err != nil || k == nil {
		t.Fatal(err)
	}
	return k
}

// TestEncryptionRefusedWithoutVault: vault mode none has no key source, so an encrypted
// StorageClass is refused with the reason, and managed is refused by the config.
func TestEncryptionRefusedWithoutVault(t *testing.T) {
	c := newCluster(t)
	c.cfg.Encryption = config.Encryption{VaultMode: config.VaultNone}
	ctrl := c.controller(t)
	_, err := ctrl.CreateVolume(context.Background(), &csipb.CreateVolumeRequest{Name: "pvc-x", VolumeCapabilities: mountRW,
		Parameters: map[string]string{csi.ParamEncrypted: "true"}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "vaultMode is none") {
		t.Fatalf("encrypted volume with vault mode none: %v", err)
	}
	c.cfg.Encryption = config.Encryption{VaultMode: config.VaultManaged}
	if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), "managed is not supported") {
		t.Fatalf("managed accepted: %v", err)
	}
}

// TestGrantChecked: a cloudspace-scoped credential stops the controller at start with the
// reason, not at the first PVC.
func TestGrantChecked(t *testing.T) {
	c := newCluster(t)
	snap := c.sim.Snapshot()
	if _, err := c.sim.AddPrincipal(vcosim.Principal{Name: "csi", Customer: vcosim.SeedCustomer,
		Grants: []vcosim.Grant{{ResourceType: "cloudspace", ResourceID: snap.Cloudspaces[0].ID}}}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.sim.Token("csi", 0)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, c.cfg.CredentialsDir, map[string]string{"jwt": tok})
	ctrl := &csi.Controller{Config: c.cfg, Platform: (&cluster{cfg: c.cfg}).platform()}
	err = ctrl.CheckGrant(context.Background())
	if err == nil || !strings.Contains(err.Error(), "needs a location grant") {
		t.Fatalf("CheckGrant = %v", err)
	}

}
