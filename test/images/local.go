package images

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Repositories of the images a local management cluster with the providers installed runs.
// Tags are content tags (see WriteCached), so a changed binary or module is a new tag and a
// Deployment or Job naming it picks it up; an unchanged one is neither rebuilt nor re-imported.
const (
	ManagerRepository     = "capx.local/capx-manager"
	CAPIManagerRepository = "capx.local/cluster-api-controller"
	VCOSimRepository      = "capx.local/vcosim"
	HTTPGetRepository     = "capx.local/httpget"
	// ModuleRepository is followed by /<role>.
	ModuleRepository = "capx.local/captf-modules"
)

// ModuleRoles are the roles of the offline test modules in test/modules/<role>.
var ModuleRoles = []string{"cluster", "machine", "machinepool"}

// Main packages built into the images.
const (
	managerPackage    = modulePath + "/cmd/manager"
	vcosimPackage     = modulePath + "/cmd/vcosim"
	sleepShellPackage = modulePath + "/test/images/sleepshell"
	httpGetPackage    = modulePath + "/test/images/httpget"
	modulePath        = "github.com/capx-io/capx"
)

// LocalOptions say where the sources and the toolchain are and where the images go.
type LocalOptions struct {
	// Root is the repository.
	Root string
	// Dir receives the binaries (bin/) and the tarballs. Default <Root>/_artifacts/images.
	Dir string
	// BinDir holds the toolchain: tofu (static) and capi-manager. Default <Root>/bin.
	BinDir string
	// Progress receives one line per image. Default os.Stderr.
	Progress io.Writer
}

// LocalSet is every image of a local management cluster.
type LocalSet struct {
	// Manager is cmd/manager at /manager: the controller manager of both providers and, as
	// `/manager runner`, the CAPTF Job runner (CAPX_RUNNER_IMAGE names this same image).
	Manager Built
	// CAPIManager is the Cluster API core manager (sigs.k8s.io/cluster-api/core) at /manager.
	CAPIManager Built
	// VCOSim is the whitesky.cloud simulator at /vcosim.
	VCOSim Built
	// HTTPGet is test/images/httpget at /httpget: a probe to run as an ephemeral container.
	HTTPGet Built
	// Modules are the CAPTF module images of test/modules, by role. The machine module's image
	// also holds a /bin/sh stand-in (test/images/sleepshell) so its `slow` variable works.
	Modules map[string]Built
}

// All lists every image, the manager first.
func (s *LocalSet) All() []Built {
	all := []Built{s.Manager, s.CAPIManager, s.VCOSim, s.HTTPGet}
	for _, role := range ModuleRoles {
		all = append(all, s.Modules[role])
	}
	return all
}

// Module is the image reference of a role's test module.
func (s *LocalSet) Module(role string) string { return s.Modules[role].Ref }

// BuildLocal builds (or reuses, when nothing changed) every image of a local management
// cluster. The Go binaries are built static in one go command; the CAPI manager and tofu come
// from the toolchain (hack/toolchain.sh capi-manager tofu).
func BuildLocal(ctx context.Context, o LocalOptions) (*LocalSet, error) {
	if o.Dir == "" {
		o.Dir = filepath.Join(o.Root, "_artifacts", "images")
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(o.Root, "bin")
	}
	if o.Progress == nil {
		o.Progress = os.Stderr
	}
	for _, tool := range []string{"tofu", "capi-manager"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, tool)); err != nil {
			return nil, fmt.Errorf("images: %s not found in %s: run hack/toolchain.sh all (builds it once per machine)", tool, o.BinDir)
		}
	}
	bin := filepath.Join(o.Dir, "bin")
	start := time.Now()
	fmt.Fprintf(o.Progress, "[images] building the manager, vcosim, httpget and the /bin/sh stand-in (static; a few minutes the first time)\n")
	if err := GoBuildStaticInto(ctx, o.Root, bin, managerPackage, vcosimPackage, httpGetPackage, sleepShellPackage); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Progress, "[images] Go binaries built in %.1fs\n", time.Since(start).Seconds())

	s := &LocalSet{Modules: map[string]Built{}}
	binary := func(repo, src, at string) func() (Built, error) {
		return func() (Built, error) {
			return WriteCached(repo, Spec{
				Files:      []File{{Path: at, Source: src, Mode: 0o755}},
				Entrypoint: []string{at},
				User:       NonRootUser,
			}, o.Dir)
		}
	}
	type step struct {
		what  string
		build func() (Built, error)
		set   func(Built)
	}
	steps := []step{
		{"manager", binary(ManagerRepository, filepath.Join(bin, "manager"), "/manager"), func(b Built) { s.Manager = b }},
		{"cluster-api manager", binary(CAPIManagerRepository, filepath.Join(o.BinDir, "capi-manager"), "/manager"), func(b Built) { s.CAPIManager = b }},
		{"vcosim", binary(VCOSimRepository, filepath.Join(bin, "vcosim"), "/vcosim"), func(b Built) { s.VCOSim = b }},
		{"httpget", binary(HTTPGetRepository, filepath.Join(bin, "httpget"), "/httpget"), func(b Built) { s.HTTPGet = b }},
	}
	for _, role := range ModuleRoles {
		m := TofuModule{
			ModuleDir: filepath.Join(o.Root, "test", "modules", role),
			Runtime:   filepath.Join(o.BinDir, "tofu"),
			Role:      role,
		}
		if role == "machine" {
			m.ExtraFiles = []File{{Path: "/bin/sh", Source: filepath.Join(bin, "sleepshell"), Mode: 0o755}}
		}
		steps = append(steps, step{role + " module", func() (Built, error) {
			spec, err := m.Spec()
			if err != nil {
				return Built{}, err
			}
			return WriteCached(ModuleRepository+"/"+role, spec, o.Dir)
		}, func(b Built) { s.Modules[role] = b }})
	}
	for _, st := range steps {
		t := time.Now()
		b, err := st.build()
		if err != nil {
			return nil, fmt.Errorf("images: %s: %w", st.what, err)
		}
		st.set(b)
		how := "built"
		if b.Reused {
			how = "unchanged"
		}
		fmt.Fprintf(o.Progress, "[images] %-20s %s %s (%.1fs)\n", st.what, b.Ref, how, time.Since(t).Seconds())
	}
	return s, nil
}
