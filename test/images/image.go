package images

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRootUser is the uid:gid images run as unless a Spec says otherwise ("nonroot" in distroless
// images; the CAPTF module contract recommends it too).
const NonRootUser = "65532:65532"

// File is one entry of an image's only layer. At most one of Source, Data, Symlink or Dir is set;
// none means an empty file.
type File struct {
	// Path is the absolute path inside the image.
	Path string
	// Source is a host file whose content is copied (its own mode is ignored; Mode counts).
	Source string
	// Data is the literal content of the file.
	Data []byte
	// Symlink makes the entry a symbolic link to this target.
	Symlink string
	// Dir makes the entry a directory (parents of listed files are added as 0755 anyway).
	Dir bool
	// Mode is the permission bits (and os.ModeSticky for a directory); 0 means 0o644 for files
	// and 0o755 for directories.
	Mode os.FileMode
	// UID and GID own the entry; 0 (root) by default, so a non-root user cannot change it.
	UID, GID int
}

// Spec describes a single-layer image.
type Spec struct {
	// Ref is the name the image is imported under, e.g. "capx.local/pause:1". Use a name with a
	// registry host part so containerd does not rewrite it to docker.io/library/....
	Ref        string
	Files      []File
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	// User is "uid[:gid]"; empty runs as root.
	User   string
	Labels map[string]string
	// Architecture is the GOARCH the image's binaries are for; empty means the host's.
	Architecture string `json:",omitempty"`
}

// epoch stamps every file and the image itself, so the same inputs give the same digest.
var epoch = time.Unix(0, 0).UTC()

// Build returns the image a Spec describes. The layer is read lazily from a temporary tar file,
// which the returned cleanup removes; call it once the image has been written.
func Build(spec Spec) (img v1.Image, cleanup func(), err error) {
	return build(spec, types.DockerLayer)
}

// build is Build with the layer's media type: Docker's for docker-archive tarballs, OCI's for
// OCI layouts.
func build(spec Spec, layerType types.MediaType) (img v1.Image, cleanup func(), err error) {
	if _, err := name.ParseReference(spec.Ref, name.StrictValidation); err != nil {
		return nil, nil, fmt.Errorf("image ref %q: %w", spec.Ref, err)
	}
	layerFile, err := writeLayerTar(spec.Files)
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() { _ = os.Remove(layerFile) }
	// BestSpeed: these images never leave the machine, and gzip dominates build time otherwise.
	layer, err := tarball.LayerFromFile(layerFile, tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithCompressedCaching,
		tarball.WithMediaType(layerType))
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("image %s: layer: %w", spec.Ref, err)
	}
	img, err = mutate.AppendLayers(empty.Image, layer)
	if err == nil {
		img, err = mutate.ConfigFile(img, configFile(spec, img))
	}
	if err == nil {
		img, err = mutate.CreatedAt(img, v1.Time{Time: epoch})
	}
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("image %s: %w", spec.Ref, err)
	}
	return img, cleanup, nil
}

func configFile(spec Spec, img v1.Image) *v1.ConfigFile {
	cf, err := img.ConfigFile()
	if err != nil || cf == nil {
		cf = &v1.ConfigFile{}
	}
	cf = cf.DeepCopy()
	// ctr import unpacks only images for the host platform; an image without one is skipped.
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	if spec.Architecture != "" {
		cf.Architecture = spec.Architecture
	}
	cf.Config.Entrypoint = spec.Entrypoint
	cf.Config.Cmd = spec.Cmd
	cf.Config.Env = spec.Env
	cf.Config.WorkingDir = spec.WorkingDir
	cf.Config.User = spec.User
	cf.Config.Labels = spec.Labels
	return cf
}

// WriteTarball builds the image and writes it as a docker-archive tarball tagged spec.Ref.
func WriteTarball(spec Spec, tarPath string) error {
	img, cleanup, err := Build(spec)
	if err != nil {
		return err
	}
	defer cleanup()
	ref, err := name.ParseReference(spec.Ref)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(tarPath), 0o755); err != nil {
		return err
	}
	tmp := tarPath + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write image %s to %s: %w", spec.Ref, tarPath, err)
	}
	return os.Rename(tmp, tarPath)
}

// writeLayerTar writes the layer to a temporary file: image binaries (tofu) are large enough that
// keeping them in memory across the several passes go-containerregistry makes is wasteful.
func writeLayerTar(files []File) (string, error) {
	entries, err := withParents(files)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "capx-layer-*.tar")
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(f)
	for _, e := range entries {
		if err = writeEntry(tw, e); err != nil {
			break
		}
	}
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// withParents validates the files, adds every missing parent directory (0755, root) and sorts,
// so that a tar reader sees each directory before its content.
func withParents(files []File) ([]File, error) {
	byPath := map[string]File{}
	for _, f := range files {
		set := 0
		for _, b := range []bool{f.Source != "", f.Data != nil, f.Symlink != "", f.Dir} {
			if b {
				set++
			}
		}
		if set > 1 {
			return nil, fmt.Errorf("image file %s: set only one of Source, Data, Symlink, Dir", f.Path)
		}
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("image file %q: want a clean absolute path", f.Path)
		}
		if prev, dup := byPath[f.Path]; dup && !(prev.Dir && f.Dir) {
			return nil, fmt.Errorf("image file %s: listed twice", f.Path)
		}
		byPath[f.Path] = f
	}
	for p := range byPath {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			parent, ok := byPath[d]
			if !ok {
				byPath[d] = File{Path: d, Dir: true}
				continue
			}
			if !parent.Dir {
				return nil, fmt.Errorf("image file %s: parent %s is not a directory", p, d)
			}
		}
	}
	out := make([]File, 0, len(byPath))
	for _, f := range byPath {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func writeEntry(tw *tar.Writer, e File) error {
	name := strings.TrimPrefix(e.Path, "/")
	h := &tar.Header{Name: name, Uid: e.UID, Gid: e.GID, ModTime: epoch, Format: tar.FormatPAX}
	switch {
	case e.Dir:
		mode := int64(e.Mode.Perm())
		if mode == 0 {
			mode = 0o755
		}
		if e.Mode&os.ModeSticky != 0 {
			mode |= 0o1000 // /tmp: anyone may create, only the owner may remove
		}
		h.Typeflag, h.Name, h.Mode = tar.TypeDir, name+"/", mode
		return tw.WriteHeader(h)
	case e.Symlink != "":
		h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.Symlink, 0o777
		return tw.WriteHeader(h)
	}
	mode := e.Mode.Perm()
	if mode == 0 {
		mode = 0o644
	}
	h.Typeflag, h.Mode = tar.TypeReg, int64(mode)
	if e.Source == "" {
		h.Size = int64(len(e.Data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(e.Data)
		return err
	}
	src, err := os.Open(e.Source)
	if err != nil {
		return fmt.Errorf("image file %s: %w", e.Path, err)
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("image file %s: source %s is not a regular file", e.Path, e.Source)
	}
	h.Size = st.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if _, err := io.Copy(tw, src); err != nil {
		return fmt.Errorf("image file %s: copy %s: %w", e.Path, e.Source, err)
	}
	return nil
}

// DirFiles lists every regular file and symlink under a host directory as Files under inImage,
// keeping their relative layout. Files keep their executable bit (0755) or get 0644.
func DirFiles(hostDir, inImage string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(hostDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(hostDir, p)
		if err != nil || rel == "." {
			return err
		}
		dst := path.Join(inImage, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			files = append(files, File{Path: dst, Dir: true})
			return nil
		case info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			files = append(files, File{Path: dst, Symlink: target})
		case info.Mode().IsRegular():
			mode := os.FileMode(0o644)
			if info.Mode()&0o111 != 0 {
				mode = 0o755
			}
			files = append(files, File{Path: dst, Source: p, Mode: mode})
		default:
			return fmt.Errorf("%s: unsupported file type %s", p, info.Mode().Type())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", hostDir, err)
	}
	return files, nil
}
