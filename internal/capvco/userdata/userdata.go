// Package userdata builds a VCOMachine's cloud-init user_data: the Machine's bootstrap data;
// when the machine's node is to carry labels (the GPU add-on's cluster-api/accelerator), a part
// that adds them to the kubelet's --node-labels before kubeadm starts it; and, when
// spec.gpu.driverVersion asks for it, a part that installs the NVIDIA driver, the NVIDIA
// container toolkit and containerd's nvidia runtime on first boot.
//
// The two travel as one MIME multipart document, which cloud-init splits into its parts: the
// bootstrap data keeps its own type (cloud-config, a Jinja template of one, a shell script, a
// boothook, or the parts of a multipart document of its own), and the label and driver parts
// are shell scripts named 00-capvco-node-labels.sh and 00-capvco-gpu-driver.sh. cloud-init runs the user scripts of an instance in name
// order in its final stage, after the packages module and before "runcmd" (where kubeadm runs),
// so the node joins with the runtime configured.
//
// Everything here is pure: Build's output depends only on its inputs.
package userdata

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/textproto"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/util/validation"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
)

// GPUScriptName is the driver part's file name; cloud-init runs user scripts in name order and
// "00-" runs before "runcmd".
const GPUScriptName = "00-capvco-gpu-driver.sh"

// ErrUnsupported is wrapped by every error that a retry cannot fix: the spec or the bootstrap
// data must change.
var ErrUnsupported = errors.New("unsupported")

// driverBranchRE is an NVIDIA driver branch as Ubuntu's archive packages them
// (nvidia-utils-<branch>-server).
var driverBranchRE = regexp.MustCompile(`^[0-9]{3,4}$`)

// ValidateDriverVersion checks spec.gpu.driverVersion ("" means no driver install).
func ValidateDriverVersion(v string) error {
	if v == "" || driverBranchRE.MatchString(v) {
		return nil
	}
	return fmt.Errorf("spec.gpu.driverVersion %q: want an NVIDIA driver branch such as \"550\" (Ubuntu's archive ships the latest release of each branch; pin an exact release by building an image with it and leaving driverVersion empty): %w", v, ErrUnsupported)
}

// Build returns the VM's user_data: the bootstrap data as is when the machine asks for no driver
// install and its node for no labels, else the bootstrap data, the label part and the driver
// part as one multipart document. format is the bootstrap Secret's "format" key ("" or
// "cloud-config"; "ignition" cannot carry another part). nodeLabels are gpuaddon.NodeLabels'.
func Build(bootstrap []byte, format string, gpu *capvcov1.GPUSpec, nodeLabels map[string]string) ([]byte, error) {
	driver := gpu != nil && gpu.DriverVersion != ""
	if !driver && len(nodeLabels) == 0 {
		return bootstrap, nil
	}
	if driver {
		if err := ValidateDriverVersion(gpu.DriverVersion); err != nil {
			return nil, err
		}
	}
	if format != "" && format != "cloud-config" {
		if !driver {
			return nil, fmt.Errorf("bootstrap data format %q cannot carry the node labels %s the GPU add-on needs (only cloud-config can): add them to the kubelet's --node-labels in the bootstrap configuration, or set spec.addons.gpu.addon to none: %w", format, labelArg(nodeLabels), ErrUnsupported)
		}
		return nil, fmt.Errorf("bootstrap data format %q cannot carry the GPU driver install of spec.gpu.driverVersion (only cloud-config can): use an image with the driver and leave driverVersion empty: %w", format, ErrUnsupported)
	}
	parts, err := bootstrapParts(bootstrap)
	if err != nil {
		return nil, err
	}
	if len(nodeLabels) > 0 {
		script, err := NodeLabelsScript(nodeLabels, KubeletDefaults)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part{
			header: textproto.MIMEHeader{
				"Content-Type":        {`text/x-shellscript; charset="utf-8"`},
				"Content-Disposition": {`attachment; filename="` + NodeLabelsScriptName + `"`},
			},
			body: script,
		})
	}
	if !driver {
		return writeMultipart(parts)
	}
	script, err := GPUScript(gpu.DriverVersion)
	if err != nil {
		return nil, err
	}
	parts = append(parts, part{
		header: textproto.MIMEHeader{
			"Content-Type":        {`text/x-shellscript; charset="utf-8"`},
			"Content-Disposition": {`attachment; filename="` + GPUScriptName + `"`},
		},
		body: script,
	})
	return writeMultipart(parts)
}

// NodeLabelsScriptName is the label part's file name: it sorts before "runcmd", where kubeadm
// starts the kubelet.
const NodeLabelsScriptName = "00-capvco-node-labels.sh"

// KubeletDefaults is the environment file kubeadm's kubelet unit reads KUBELET_EXTRA_ARGS from
// (the Debian and RPM packages' 10-kubeadm.conf; /etc/default on Debian and Ubuntu images).
const KubeletDefaults = "/etc/default/kubelet"

// NodeLabelsScript is the first-boot script that adds labels to the kubelet's --node-labels in
// file (KubeletDefaults): prepended to a KUBELET_EXTRA_ARGS the image sets, or a new one. The
// kubelet merges repeated --node-labels flags, so labels kubeadm's own flags give stay.
func NodeLabelsScript(labels map[string]string, file string) ([]byte, error) {
	for k, v := range labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("node label %q: %s: %w", k, strings.Join(errs, "; "), ErrUnsupported)
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("node label %s value %q: %s: %w", k, v, strings.Join(errs, "; "), ErrUnsupported)
		}
	}
	if !strings.HasPrefix(file, "/") || strings.ContainsAny(file, " '\"\n$`|") {
		return nil, fmt.Errorf("kubelet environment file %q", file)
	}
	var b bytes.Buffer
	err := labelsScript.Execute(&b, map[string]string{"File": file, "Labels": labelArg(labels)})
	return b.Bytes(), err
}

// labelArg is --node-labels' value: key=value pairs in key order.
func labelArg(labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + labels[k]
	}
	return strings.Join(pairs, ",")
}

var labelsScript = template.Must(template.New("labels").Parse(`#!/bin/sh
# Written by CAPVCO: the kubelet registers its node with the labels {{.Labels}} (the GPU
# add-on's device plugin selects the node by them, and cluster-autoscaler reads them as "this
# node has a GPU"), before kubeadm starts it.
set -eu
f='{{.File}}'
labels='{{.Labels}}'
mkdir -p "$(dirname "$f")"
if [ -f "$f" ] && grep -q '^KUBELET_EXTRA_ARGS=' "$f"; then
	# The last assignment is the one that counts; its quotes, if any, go.
	cur=$(sed -n 's/^KUBELET_EXTRA_ARGS=//p' "$f" | tail -n 1)
	case "$cur" in
	\"*\") cur=${cur#\"}; cur=${cur%\"} ;;
	\'*\') cur=${cur#\'}; cur=${cur%\'} ;;
	esac
	{ grep -v '^KUBELET_EXTRA_ARGS=' "$f" || true; echo "KUBELET_EXTRA_ARGS=\"--node-labels=$labels${cur:+ $cur}\""; } >"$f.capvco"
	cat "$f.capvco" >"$f"
	rm -f "$f.capvco"
else
	echo "KUBELET_EXTRA_ARGS=\"--node-labels=$labels\"" >>"$f"
fi
echo "capvco-node-labels: --node-labels=$labels in $f" >&2
`))

// part is one MIME part: its headers and its raw body.
type part struct {
	header textproto.MIMEHeader
	body   []byte
}

// startTypes maps the first line of a user-data document to its MIME type, as cloud-init
// recognises them.
var startTypes = []struct{ prefix, mimeType string }{
	{"## template: jinja", "text/jinja2"},
	{"#cloud-config-archive", "text/cloud-config-archive"},
	{"#cloud-config", "text/cloud-config"},
	{"#cloud-boothook", "text/cloud-boothook"},
	{"#!", "text/x-shellscript"},
}

// bootstrapParts splits bootstrap data into the parts to carry: a multipart document's own
// parts, or the whole data as one part of the type its first line names.
func bootstrapParts(data []byte) ([]part, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("bootstrap data is empty: %w", ErrUnsupported)
	}
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		return nil, fmt.Errorf("bootstrap data is gzip-compressed, which cannot be merged with the GPU driver install: %w", ErrUnsupported)
	}
	if isMultipart(data) {
		return splitMultipart(data)
	}
	for _, t := range startTypes {
		if bytes.HasPrefix(data, []byte(t.prefix)) {
			return []part{{
				header: textproto.MIMEHeader{
					"Content-Type":        {t.mimeType + `; charset="utf-8"`},
					"Content-Disposition": {`attachment; filename="bootstrap"`},
				},
				body: data,
			}}, nil
		}
	}
	first, _, _ := strings.Cut(string(data), "\n")
	if len(first) > 40 {
		first = first[:40] + "..."
	}
	return nil, fmt.Errorf("bootstrap data starts with %q, not a cloud-init type (#cloud-config, ## template: jinja, #!, #cloud-boothook, #cloud-config-archive or a MIME multipart document): %w", first, ErrUnsupported)
}

func isMultipart(data []byte) bool {
	h, _, err := readHeader(data)
	if err != nil {
		return false
	}
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && strings.HasPrefix(mt, "multipart/")
}

func readHeader(data []byte) (textproto.MIMEHeader, io.Reader, error) {
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(data)))
	h, err := r.ReadMIMEHeader()
	if err != nil {
		return nil, nil, err
	}
	return h, r.R, nil
}

// splitMultipart returns the parts of a multipart document, headers and bodies untouched.
func splitMultipart(data []byte) ([]part, error) {
	h, body, err := readHeader(data)
	if err != nil {
		return nil, fmt.Errorf("bootstrap data: MIME header: %v: %w", err, ErrUnsupported)
	}
	_, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return nil, fmt.Errorf("bootstrap data: multipart Content-Type without a boundary: %w", ErrUnsupported)
	}
	mr := multipart.NewReader(body, params["boundary"])
	var parts []part
	for {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("bootstrap data: multipart part %d: %v: %w", len(parts)+1, err, ErrUnsupported)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("bootstrap data: multipart part %d: %v: %w", len(parts)+1, err, ErrUnsupported)
		}
		if p.FileName() == GPUScriptName {
			return nil, fmt.Errorf("bootstrap data already has a part named %s: %w", GPUScriptName, ErrUnsupported)
		}
		parts = append(parts, part{header: p.Header, body: b})
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("bootstrap data: multipart document without parts: %w", ErrUnsupported)
	}
	return parts, nil
}

// writeMultipart writes the document with a boundary derived from its parts, so the same
// inputs always give the same bytes.
func writeMultipart(parts []part) ([]byte, error) {
	sum := sha256.New()
	for _, p := range parts {
		sum.Write(p.body)
	}
	boundary := "capvco-" + hex.EncodeToString(sum.Sum(nil))[:32]
	var buf bytes.Buffer
	buf.WriteString("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"" + boundary + "\"\r\n\r\n")
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(boundary); err != nil {
		return nil, err
	}
	for _, p := range parts {
		if bytes.Contains(p.body, []byte("--"+boundary)) {
			return nil, fmt.Errorf("bootstrap data contains the boundary %s: %w", boundary, ErrUnsupported)
		}
		pw, err := w.CreatePart(p.header)
		if err != nil {
			return nil, err
		}
		if _, err := pw.Write(p.body); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// GPUScript is the first-boot script for a driver branch: the driver from Ubuntu's archive
// (ubuntu-drivers picks the prebuilt, signed kernel modules of the running kernel), nvidia-smi,
// the container toolkit from NVIDIA's apt repository, containerd's nvidia runtime as the
// default, and a check that nvidia-smi sees the GPU. It needs egress to both repositories.
func GPUScript(branch string) ([]byte, error) {
	if !driverBranchRE.MatchString(branch) {
		return nil, ValidateDriverVersion(branch)
	}
	var b bytes.Buffer
	if err := gpuScript.Execute(&b, map[string]string{"Branch": branch, "KeyURL": NVIDIAKeyURL, "RepoURL": NVIDIARepoURL}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// NVIDIA's apt repository for the container toolkit, and its signing key.
const (
	NVIDIARepoURL = "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"
	NVIDIAKeyURL  = "https://nvidia.github.io/libnvidia-container/gpgkey"
)

var gpuScript = template.Must(template.New("gpu").Parse(`#!/bin/sh
# Written by CAPVCO for spec.gpu.driverVersion {{.Branch}}: installs the NVIDIA driver branch
# {{.Branch}} from Ubuntu's archive, the NVIDIA container toolkit from NVIDIA's apt repository
# and containerd's nvidia runtime, before kubeadm runs. Needs egress to both repositories.
set -eu
export DEBIAN_FRONTEND=noninteractive
log() { echo "capvco-gpu-driver: $*" >&2; }
apt_get() { apt-get -o DPkg::Lock::Timeout=600 -y "$@"; }

log "installing NVIDIA driver branch {{.Branch}} from Ubuntu's archive"
apt_get update
apt_get install --no-install-recommends ubuntu-drivers-common ca-certificates curl gnupg
ubuntu-drivers install --gpgpu "nvidia:{{.Branch}}-server"
apt_get install --no-install-recommends "nvidia-utils-{{.Branch}}-server"

log "installing the NVIDIA container toolkit from {{.RepoURL}}"
curl -fsSL "{{.KeyURL}}" | gpg --dearmor --yes -o /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
echo 'deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] {{.RepoURL}} /' >/etc/apt/sources.list.d/nvidia-container-toolkit.list
apt_get update
apt_get install --no-install-recommends nvidia-container-toolkit

log "configuring containerd's nvidia runtime (default runtime)"
nvidia-ctk runtime configure --runtime=containerd --set-as-default
systemctl restart containerd

modprobe nvidia || true
if ! nvidia-smi; then
	log "nvidia-smi fails: the driver is installed but sees no usable GPU (a stub or mediated vGPU profile needs no driverVersion, or a licensed guest driver in your own image)"
	exit 1
fi
log "done"
`))
