package images

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// CRINamespace is the containerd namespace the kubelet's CRI plugin reads images from.
const CRINamespace = "k8s.io"

// Import loads an image tarball into the containerd listening on address (its grpc socket), in
// the k8s.io namespace, unpacked for the default snapshotter so that pods can start from it.
func Import(ctx context.Context, address, tarPath string) error {
	cmd := exec.CommandContext(ctx, "ctr", "--address", address, "-n", CRINamespace, "images", "import", tarPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", tarPath, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// List returns the references of the images in the k8s.io namespace of the containerd
// listening on address.
func List(ctx context.Context, address string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "ctr", "--address", address, "-n", CRINamespace, "images", "ls", "-q")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("ctr images ls: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.Fields(out.String()), nil
}
