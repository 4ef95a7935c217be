package images

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Built is an image tarball written for a cluster to import.
type Built struct {
	// Ref is the name the tarball is tagged with (repository:tag).
	Ref string
	// Tarball is the docker-archive file.
	Tarball string
	// Reused says the tarball of an earlier build with the same content was kept.
	Reused bool
}

// TagLen is the length of content tags: the first hex digits of Key.
const TagLen = 12

// Key digests everything an image is built from except its name: every file's path, mode,
// owner and content, the entrypoint, command, environment, working directory, user and labels.
// Images are reproducible (fixed timestamps), so equal keys mean equal images.
func Key(spec Spec) (string, error) {
	entries, err := withParents(spec.Files)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	meta := spec
	meta.Ref, meta.Files = "", nil
	if err := json.NewEncoder(h).Encode(meta); err != nil {
		return "", err
	}
	for _, e := range entries {
		fmt.Fprintf(h, "%s\x00%o\x00%d:%d\x00%t\x00%s\x00", e.Path, e.Mode, e.UID, e.GID, e.Dir, e.Symlink)
		switch {
		case e.Source != "":
			f, err := os.Open(e.Source)
			if err != nil {
				return "", fmt.Errorf("image file %s: %w", e.Path, err)
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return "", fmt.Errorf("image file %s: %w", e.Path, err)
			}
		default:
			h.Write(e.Data)
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// WriteCached tags the image of spec with its content (repository:<first TagLen hex digits of
// Key>) and writes its tarball into dir as <last element of repository>-<tag>.tar, unless that
// file is already there from an earlier build of the same content. Tarballs of other tags of the
// same repository are removed, so dir holds one per repository. spec.Ref is ignored.
func WriteCached(repository string, spec Spec, dir string) (Built, error) {
	if _, err := name.NewRepository(repository, name.StrictValidation); err != nil {
		return Built{}, fmt.Errorf("image repository %q: %w", repository, err)
	}
	key, err := Key(spec)
	if err != nil {
		return Built{}, fmt.Errorf("image %s: %w", repository, err)
	}
	tag := key[:TagLen]
	base := path.Base(repository)
	b := Built{Ref: repository + ":" + tag, Tarball: filepath.Join(dir, base+"-"+tag+".tar")}
	if _, err := os.Stat(b.Tarball); err == nil {
		b.Reused = true
		return b, nil
	}
	spec.Ref = b.Ref
	if err := WriteTarball(spec, b.Tarball); err != nil {
		return Built{}, err
	}
	old, _ := filepath.Glob(filepath.Join(dir, base+"-*.tar"))
	for _, o := range old {
		if o != b.Tarball && len(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(o), base+"-"), ".tar")) == TagLen {
			_ = os.Remove(o)
		}
	}
	return b, nil
}
