package images

import (
	"fmt"
	"os"
)

// Fixed paths of the CAPTF module contract v1alpha1: the module's .tf files, and the tofu or
// terraform binary the runner calls.
const (
	ModuleDir   = "/captf/module"
	RuntimePath = "/captf/runtime"
	// ContractVersion is the io.captf.contract label value.
	ContractVersion = "v1alpha1"
)

// TofuModule describes a CAPTF module image: one role's module plus the runtime binary.
type TofuModule struct {
	// Ref is the image name, e.g. "capx.local/captf-module-test:1".
	Ref string
	// ModuleDir is the host directory copied to /captf/module/.
	ModuleDir string
	// Runtime is the static tofu binary (bin/tofu, built with CGO_ENABLED=0) copied to
	// /captf/runtime. A dynamically linked binary would fail in the image: it has no libc.
	Runtime string
	// Role is the io.captf.role label (cluster, machine or machinepool); optional.
	Role string
	// RuntimeVersion is the io.captf.runtime.version label; optional.
	RuntimeVersion string
	// Labels are extra image labels.
	Labels map[string]string
	// ExtraFiles are added to the image, e.g. a /bin/sh for a module's local-exec provisioner.
	// They must stay clear of the contract paths.
	ExtraFiles []File
}

// Spec returns the image Spec of a module image: the module at /captf/module/, the runtime at
// /captf/runtime, user 65532, the contract labels. Nothing is placed under the paths the Job
// mounts over (/captf/work, /captf/bin, /captf/config, /tmp).
func (m TofuModule) Spec() (Spec, error) {
	if st, err := os.Stat(m.ModuleDir); err != nil || !st.IsDir() {
		return Spec{}, fmt.Errorf("module dir %q: not a directory (%v)", m.ModuleDir, err)
	}
	if st, err := os.Stat(m.Runtime); err != nil || st.Mode()&0o111 == 0 {
		return Spec{}, fmt.Errorf("runtime %q: not an executable file (%v)", m.Runtime, err)
	}
	files, err := DirFiles(m.ModuleDir, ModuleDir)
	if err != nil {
		return Spec{}, err
	}
	files = append(files,
		File{Path: ModuleDir, Dir: true},
		File{Path: RuntimePath, Source: m.Runtime, Mode: 0o755})
	files = append(files, m.ExtraFiles...)
	labels := map[string]string{
		"io.captf.contract": ContractVersion,
		"io.captf.runtime":  "tofu",
	}
	if m.Role != "" {
		labels["io.captf.role"] = m.Role
	}
	if m.RuntimeVersion != "" {
		labels["io.captf.runtime.version"] = m.RuntimeVersion
	}
	for k, v := range m.Labels {
		labels[k] = v
	}
	return Spec{
		Ref:        m.Ref,
		Files:      files,
		Entrypoint: []string{RuntimePath},
		WorkingDir: ModuleDir,
		User:       NonRootUser,
		Env:        []string{"TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1"},
		Labels:     labels,
	}, nil
}

// WriteTarball writes the module image as a tarball.
func (m TofuModule) WriteTarball(tarPath string) error {
	spec, err := m.Spec()
	if err != nil {
		return err
	}
	return WriteTarball(spec, tarPath)
}
