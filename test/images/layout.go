package images

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WriteLayout writes one multi-platform image as an OCI image layout in dir (replacing what is
// there): an image index with one OCI image per Spec, each for linux and its Spec's
// Architecture, the index annotated with ref (org.opencontainers.image.ref.name) so that
// `ctr images import --all-platforms` and other OCI tools name it. Each Spec's Ref is ignored.
func WriteLayout(dir, ref string, specs ...Spec) error {
	if len(specs) == 0 {
		return fmt.Errorf("image %s: no platforms", ref)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	var idx v1.ImageIndex = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	var cleanups []func()
	defer func() {
		for _, c := range cleanups {
			c()
		}
	}()
	for _, spec := range specs {
		spec.Ref = ref
		img, cleanup, err := build(spec, types.OCILayer)
		if err != nil {
			return err
		}
		cleanups = append(cleanups, cleanup)
		img = mutate.MediaType(mutate.ConfigMediaType(img, types.OCIConfigJSON), types.OCIManifestSchema1)
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		if seen[cf.Architecture] {
			return fmt.Errorf("image %s: two images for linux/%s", ref, cf.Architecture)
		}
		seen[cf.Architecture] = true
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				MediaType: types.OCIManifestSchema1,
				Platform:  &v1.Platform{OS: cf.OS, Architecture: cf.Architecture},
			},
		})
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref}))
}

// TarDir writes the files under dir into a tar archive at out, sorted, with fixed times and
// owners, so the same layout always gives the same archive (an OCI layout tarball for `ctr
// images import`, for example).
func TarDir(dir, out string) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	f, err := os.Create(out + ".tmp")
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, p := range paths {
		if err = tarEntry(tw, dir, p); err != nil {
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
		_ = os.Remove(out + ".tmp")
		return err
	}
	return os.Rename(out+".tmp", out)
}

func tarEntry(tw *tar.Writer, dir, p string) error {
	st, err := os.Lstat(p)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return err
	}
	h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Format: tar.FormatPAX}
	switch {
	case st.IsDir():
		h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		return tw.WriteHeader(h)
	case st.Mode().IsRegular():
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, st.Size()
	default:
		return fmt.Errorf("%s: not a file or directory", p)
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	src, err := os.Open(p)
	if err != nil {
		return err
	}
	defer src.Close()
	_, err = io.Copy(tw, src)
	return err
}
