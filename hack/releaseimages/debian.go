package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/capx-io/capx/test/images"
)

// Debian's tools in an image: the CSI driver formats, checks, grows, mounts and encrypts volumes
// with the host tools k8s.io/mount-utils and internal/capvco/csi/luks run by name. They are taken
// from the Debian packages installed on a root file system (this machine's, where
// hack/install-deps.sh installs them; for another architecture a root hack/releaseimages/
// debian-root.sh extracts from the archive), each with the shared libraries it loads (its
// ELF dependencies, found the way the dynamic loader does) and the packages' copyright files,
// and listed with their package versions in the image's SBOM.

// debTool is a program an image runs by name, and the Debian package that ships it.
type debTool struct{ name, pkg string }

// csiTools are what the CSI node plugin runs (mount-utils: mount, umount, blkid, fsck and the
// fsck.<type> it calls, mkfs.<type>, resize2fs, xfs_growfs, xfs_repair, blockdev; luks:
// cryptsetup), with the programs the listed names are links to.
var csiTools = []debTool{
	{"mount", "mount"}, {"umount", "mount"},
	{"blkid", "util-linux"}, {"fsck", "util-linux"}, {"blockdev", "util-linux"},
	{"mkfs.ext4", "e2fsprogs"}, {"mke2fs", "e2fsprogs"}, {"fsck.ext4", "e2fsprogs"}, {"e2fsck", "e2fsprogs"}, {"resize2fs", "e2fsprogs"},
	{"mkfs.xfs", "xfsprogs"}, {"xfs_repair", "xfsprogs"}, {"xfs_growfs", "xfsprogs"},
	{"cryptsetup", "cryptsetup-bin"},
}

// csiConfigFiles are configuration files the tools read, from their packages.
var csiConfigFiles = map[string]string{"/etc/mke2fs.conf": "e2fsprogs"}

// debPackage is a package whose files an image ships.
type debPackage struct {
	name, arch, version, source, sourceVersion string
}

// debianRoot is a Debian file system with its package database.
type debianRoot struct {
	dir, arch string
	pkgs      map[string]debPackage // by name, filled as files are taken
}

func (r *debianRoot) query(args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("dpkg-query", append([]string{"--admindir=" + filepath.Join(r.dir, "var", "lib", "dpkg")}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("dpkg-query %s in %s: %w: %s", strings.Join(args, " "), r.dir, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// pkg reads an installed package's version and source, refusing one of another architecture.
func (r *debianRoot) pkg(name string) (debPackage, error) {
	if p, ok := r.pkgs[name]; ok {
		return p, nil
	}
	out, err := r.query("-W", "-f", "${db:Status-Abbrev}|${Architecture}|${Version}|${source:Package}|${source:Version}", name)
	if err != nil {
		return debPackage{}, fmt.Errorf("%w (hack/install-deps.sh installs the CSI driver's tools; another architecture's root: hack/releaseimages/debian-root.sh)", err)
	}
	f := strings.Split(strings.TrimSpace(out), "|")
	if len(f) != 5 || !strings.HasPrefix(f[0], "ii") {
		return debPackage{}, fmt.Errorf("package %s is not installed in %s (%q): run hack/install-deps.sh", name, r.dir, out)
	}
	if f[1] != r.arch && f[1] != "all" {
		return debPackage{}, fmt.Errorf("package %s in %s is for %s, not %s", name, r.dir, f[1], r.arch)
	}
	p := debPackage{name: name, arch: f[1], version: f[2], source: f[3], sourceVersion: f[4]}
	r.pkgs[name] = p
	return p, nil
}

// owner is the package that ships a file (a path as dpkg lists it, which may be the one before
// /usr was merged: /lib/x86_64-linux-gnu/libc.so.6 for /usr/lib/...).
func (r *debianRoot) owner(p string) (string, error) {
	var errs []error
	for _, candidate := range slices.Compact([]string{p, unmerged(p), merged(p)}) {
		out, err := r.query("-S", candidate)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			pkgs, file, ok := strings.Cut(line, ": ")
			if !ok || strings.HasPrefix(line, "diversion ") || file != candidate {
				continue
			}
			name, _, _ := strings.Cut(strings.Split(pkgs, ", ")[0], ":")
			return name, nil
		}
	}
	return "", fmt.Errorf("no package of %s ships %s: %w", r.dir, p, errors.Join(errs...))
}

// unmerged is a /usr path as a package from before the /usr merge lists it, or the path itself.
func unmerged(p string) string {
	for _, d := range []string{"bin", "sbin", "lib", "lib64"} {
		if rest, ok := strings.CutPrefix(p, "/usr/"+d+"/"); ok {
			return "/" + d + "/" + rest
		}
	}
	return p
}

// merged is where a file lives in the image, whose /bin, /sbin, /lib and /lib64 link into /usr
// (as Debian's since bookworm).
func merged(p string) string {
	for _, d := range []string{"bin", "sbin", "lib", "lib64"} {
		if rest, ok := strings.CutPrefix(p, "/"+d+"/"); ok {
			return "/usr/" + d + "/" + rest
		}
	}
	return p
}

// usrMergeLinks are the image's top-level links into /usr.
var usrMergeLinks = []images.File{
	{Path: "/bin", Symlink: "usr/bin"}, {Path: "/sbin", Symlink: "usr/sbin"},
	{Path: "/lib", Symlink: "usr/lib"}, {Path: "/lib64", Symlink: "usr/lib64"},
}

// debianContent is what an image needs to run the tools: the tools, their libraries and the
// dynamic loader, the configuration files, the packages' copyright files, and the packages.
type debianContent struct {
	files []images.File
	pkgs  []debPackage
}

func collectDebian(root, arch string, tools []debTool, configs map[string]string) (debianContent, error) {
	r := &debianRoot{dir: root, arch: arch, pkgs: map[string]debPackage{}}
	c := &collector{r: r, seen: map[string]bool{}}
	for _, t := range tools {
		p, err := r.pkg(t.pkg)
		if err != nil {
			return debianContent{}, err
		}
		listed, err := r.query("-L", p.name)
		if err != nil {
			return debianContent{}, err
		}
		found := ""
		for _, f := range strings.Split(listed, "\n") {
			if path.Base(f) == t.name && (path.Dir(merged(f)) == "/usr/bin" || path.Dir(merged(f)) == "/usr/sbin") {
				found = f
				break
			}
		}
		if found == "" {
			return debianContent{}, fmt.Errorf("package %s %s ships no %s in a bin or sbin folder", p.name, p.version, t.name)
		}
		if err := c.add(found, p.name); err != nil {
			return debianContent{}, fmt.Errorf("%s: %w", t.name, err)
		}
	}
	for _, f := range sortedKeys(configs) {
		p, err := r.pkg(configs[f])
		if err != nil {
			return debianContent{}, err
		}
		if owner, err := r.owner(f); err != nil || owner != p.name {
			return debianContent{}, fmt.Errorf("%s is not %s's (%s, %v)", f, p.name, owner, err)
		}
		if err := c.add(f, p.name); err != nil {
			return debianContent{}, err
		}
	}
	out := debianContent{files: append(append([]images.File{}, usrMergeLinks...), c.files...)}
	for _, name := range sortedKeys(r.pkgs) {
		p := r.pkgs[name]
		out.pkgs = append(out.pkgs, p)
		copyright := "/usr/share/doc/" + p.name + "/copyright"
		if _, err := os.Stat(filepath.Join(root, copyright)); err == nil {
			out.files = append(out.files, images.File{Path: copyright, Source: filepath.Join(root, copyright)})
		}
	}
	return out, nil
}

// collector gathers files and, for ELF files, the libraries they load.
type collector struct {
	r     *debianRoot
	seen  map[string]bool // image paths
	files []images.File
}

// add takes the file at p (a path in the root) from package pkg into the image, following a
// symbolic link to its target and an ELF file to its interpreter and libraries.
func (c *collector) add(p, pkg string) error {
	dst := merged(p)
	if c.seen[dst] {
		return nil
	}
	c.seen[dst] = true
	if _, err := c.r.pkg(pkg); err != nil {
		return err
	}
	// A root extracted from packages keeps their paths; this machine's is merged.
	src := filepath.Join(c.r.dir, p)
	fi, err := os.Lstat(src)
	if errors.Is(err, os.ErrNotExist) {
		src = filepath.Join(c.r.dir, unmerged(p))
		fi, err = os.Lstat(src)
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(p), target)
		}
		c.files = append(c.files, images.File{Path: dst, Symlink: merged(target)})
		owner, err := c.r.owner(merged(target))
		if err != nil {
			return err
		}
		return c.add(merged(target), owner)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is neither a file nor a link (%s)", src, fi.Mode())
	}
	c.files = append(c.files, images.File{Path: dst, Source: src, Mode: fi.Mode().Perm()})
	needed, err := c.elfNeeds(src)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	for _, n := range needed {
		owner, err := c.r.owner(n)
		if err != nil {
			return err
		}
		if err := c.add(n, owner); err != nil {
			return err
		}
	}
	return nil
}

// elfNeeds is an ELF file's interpreter and the libraries it names, found in the root's library
// folders for its architecture; nothing for a file that is not ELF.
func (c *collector) elfNeeds(src string) ([]string, error) {
	f, err := elf.Open(src)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) {
			return nil, nil // a script or data
		}
		return nil, err
	}
	defer f.Close()
	var out []string
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(b, 0); err != nil {
				return nil, err
			}
			out = append(out, strings.TrimRight(string(b), "\x00"))
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, err
	}
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[c.r.arch]
	for _, lib := range libs {
		found := ""
		for _, dir := range []string{"/lib/" + triplet, "/usr/lib/" + triplet, "/lib", "/usr/lib"} {
			if _, err := os.Stat(filepath.Join(c.r.dir, dir, lib)); err == nil {
				found = dir + "/" + lib
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("library %s not found in %s", lib, c.r.dir)
		}
		out = append(out, found)
	}
	sort.Strings(out)
	return out, nil
}
