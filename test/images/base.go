package images

import (
	"archive/zip"
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// Paths of the base content that release images carry.
const (
	// CABundlePath is where Go's crypto/x509 (and OpenSSL-based tools) look on Linux first.
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	// ZoneinfoDir holds the time zone database, where Go's time package looks on Linux.
	ZoneinfoDir = "/usr/share/zoneinfo"
	// NonRootHome is the home of the nonroot user (uid 65532): tools that write to $HOME (a
	// provider plugin cache, for example) have somewhere to do it.
	NonRootHome = "/home/nonroot"
)

// BaseContent is what a distroless "static" base gives a static binary, built here from files
// this module pins instead of from a base image that would have to be pulled: root and nonroot
// (65532) users and groups, a CA bundle, the time zone database, a world-writable /tmp with the
// sticky bit, and the nonroot user's home. Licence notices of what it ships go under
// /usr/share/doc (the CA bundle's data is Mozilla's, under MPL-2.0).
//
// The CA bundle is golang.org/x/crypto/x509roots/fallback's copy of the Mozilla NSS trust store
// at the version go.mod requires, written as PEM. Roots that NSS distrusts after a date carry a
// constraint a PEM file cannot express, so they are left out rather than trusted without it. The
// time zone database is the Go toolchain's own ($GOROOT/lib/time/zoneinfo.zip), unpacked.
func BaseContent() ([]File, error) {
	certs, err := CABundle()
	if err != nil {
		return nil, err
	}
	zones, err := zoneinfo()
	if err != nil {
		return nil, err
	}
	files := []File{
		{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:" + NonRootHome + ":/sbin/nologin\n")},
		{Path: "/etc/group", Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{Path: "/etc/nsswitch.conf", Data: []byte("hosts: files dns\n")},
		{Path: CABundlePath, Data: certs},
		{Path: "/tmp", Dir: true, Mode: 0o777 | os.ModeSticky},
		{Path: "/root", Dir: true, Mode: 0o700},
		{Path: NonRootHome, Dir: true, Mode: 0o700, UID: 65532, GID: 65532},
		{Path: "/usr/share/doc/ca-certificates/NOTICE", Data: []byte(caNotice)},
	}
	return append(files, zones...), nil
}

const caNotice = `/etc/ssl/certs/ca-certificates.crt holds the root certificates of the Mozilla NSS
trust store (https://hg.mozilla.org/projects/nss, lib/ckfw/builtins/certdata.txt), which Mozilla
publishes under the Mozilla Public License 2.0 (https://mozilla.org/MPL/2.0/). They are taken
from the Go module golang.org/x/crypto/x509roots/fallback (BSD-3-Clause); roots that NSS
distrusts after a date are left out.
`

// CABundle is the PEM bundle of BaseContent's CA file.
func CABundle() ([]byte, error) {
	var b bytes.Buffer
	n := 0
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		c, err := x509.ParseCertificate(r.Certificate)
		if err != nil {
			return nil, fmt.Errorf("CA bundle: %w", err)
		}
		fmt.Fprintf(&b, "# %s\n", c.Subject)
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("CA bundle: golang.org/x/crypto/x509roots/fallback has no unconstrained root")
	}
	return b.Bytes(), nil
}

// zoneinfo unpacks the Go toolchain's time zone database under ZoneinfoDir.
func zoneinfo() ([]File, error) {
	zp := filepath.Join(runtime.GOROOT(), "lib", "time", "zoneinfo.zip")
	if root := os.Getenv("GOROOT"); root != "" {
		zp = filepath.Join(root, "lib", "time", "zoneinfo.zip")
	}
	z, err := zip.OpenReader(zp)
	if err != nil {
		return nil, fmt.Errorf("time zone database: %w", err)
	}
	defer z.Close()
	var files []File
	for _, f := range z.File {
		if f.FileInfo().IsDir() {
			continue
		}
		name := path.Clean("/" + f.Name)
		if strings.Contains(f.Name, "..") || name == "/" {
			return nil, fmt.Errorf("time zone database %s: bad entry %q", zp, f.Name)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("time zone database %s: %s: %w", zp, f.Name, err)
		}
		files = append(files, File{Path: ZoneinfoDir + name, Data: data})
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("time zone database %s is empty", zp)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}
