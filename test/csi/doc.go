// Package csi holds the end-to-end test of capvco-csi-driver on real kubelets (build tag e2e):
// the whitesky.cloud simulator's VMs boot as real nodes (test/localcluster/vcohost), their disks
// are loop devices (internal/capvco/csi/csitest), and the real external-provisioner,
// external-attacher, csi-snapshotter and snapshot-controller (hack/csi-sidecars.sh) drive the
// driver. docs/capvco/storage.md says what it proves.
package csi
