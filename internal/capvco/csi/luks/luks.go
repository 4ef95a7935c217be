// Package luks formats and opens LUKS2 volumes with cryptsetup, the key always passed on
// standard input, never in an argument or a file another process could read.
package luks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Cryptsetup runs the cryptsetup binary.
type Cryptsetup struct {
	// Path is the binary; empty looks cryptsetup up in PATH.
	Path string
	// MapperDir is where opened volumes appear; empty means /dev/mapper.
	MapperDir string
}

// ErrMissing means the node has no cryptsetup: encrypted volumes cannot be staged there.
var ErrMissing = errors.New("cryptsetup is not installed: encrypted volumes need it in the driver image (the capvco-csi-driver image ships it; a custom image must add the cryptsetup package)")

// Check says whether cryptsetup is there and the kernel can map devices (dm-crypt).
func (c Cryptsetup) Check() error {
	if _, err := c.bin(); err != nil {
		return err
	}
	// /dev/mapper/control can exist on a kernel without the driver; the kernel's list of misc
	// devices says whether it is there.
	misc, err := os.ReadFile("/proc/misc")
	if err != nil {
		return fmt.Errorf("reading /proc/misc: %w", err)
	}
	if !bytes.Contains(misc, []byte(" device-mapper\n")) {
		return errors.New("the kernel has no device mapper (no device-mapper in /proc/misc): encrypted volumes need dm-crypt (dm_mod, dm_crypt) on the node")
	}
	return nil
}

func (c Cryptsetup) bin() (string, error) {
	name := c.Path
	if name == "" {
		name = "cryptsetup"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", ErrMissing
	}
	return p, nil
}

func (c Cryptsetup) run(ctx context.Context, key []byte, args ...string) (string, error) {
	bin, err := c.bin()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = bytes.NewReader(key)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	msg := strings.TrimSpace(out.String())
	if len(msg) > 500 {
		msg = msg[:500]
	}
	if err != nil {
		return msg, fmt.Errorf("cryptsetup %s: %w: %s", args[0], err, msg)
	}
	return msg, nil
}

// IsLUKS says whether device carries a LUKS header.
func (c Cryptsetup) IsLUKS(ctx context.Context, device string) (bool, error) {
	bin, err := c.bin()
	if err != nil {
		return false, err
	}
	err = exec.CommandContext(ctx, bin, "isLuks", device).Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return false, nil
	}
	return err == nil, err
}

// Format writes a LUKS2 header with key as its only passphrase (a 256-bit random key, so
// the key derivation adds nothing and is kept cheap) and a token holding wrapped, the key's
// wrapped form, so that whoever opens the device later can have it unwrapped.
func (c Cryptsetup) Format(ctx context.Context, device string, key []byte, wrapped string) error {
	if _, err := c.run(ctx, key, "luksFormat", "--type", "luks2", "--batch-mode", "--cipher", "aes-xts-plain64", "--key-size", "512",
		"--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--key-file", "-", device); err != nil {
		return err
	}
	tok, err := json.Marshal(token{Type: tokenType, Keyslots: []string{"0"}, Wrapped: wrapped})
	if err != nil {
		return err
	}
	_, err = c.run(ctx, tok, "token", "import", "--token-id", "0", "--json-file", "-", device)
	return err
}

// tokenType names the LUKS2 token that carries the wrapped key.
const tokenType = "capvco-transit"

type token struct {
	Type     string   `json:"type"`
	Keyslots []string `json:"keyslots"`
	Wrapped  string   `json:"capvco_wrapped_key"`
}

// WrappedKey reads the wrapped key from the device's LUKS2 token.
func (c Cryptsetup) WrappedKey(ctx context.Context, device string) (string, error) {
	out, err := c.run(ctx, nil, "token", "export", "--token-id", "0", device)
	if err != nil {
		return "", err
	}
	var t token
	if err := json.Unmarshal([]byte(out), &t); err != nil || t.Type != tokenType || t.Wrapped == "" {
		return "", fmt.Errorf("%s: LUKS2 token 0 is not a %s token", device, tokenType)
	}
	return t.Wrapped, nil
}

// MapperName is the name a disk's opened volume gets.
func MapperName(diskID int) string { return fmt.Sprintf("capvco-disk-%d", diskID) }

// Path is where an opened volume appears.
func (c Cryptsetup) MappedPath(name string) string {
	dir := c.MapperDir
	if dir == "" {
		dir = "/dev/mapper"
	}
	return filepath.Join(dir, name)
}

// Open maps device as name and returns the mapped device; an already open name is reused.
func (c Cryptsetup) Open(ctx context.Context, device, name string, key []byte) (string, error) {
	if _, err := os.Stat(c.MappedPath(name)); err == nil {
		return c.MappedPath(name), nil
	}
	if _, err := c.run(ctx, key, "open", "--type", "luks2", "--key-file", "-", device, name); err != nil {
		return "", err
	}
	return c.MappedPath(name), nil
}

// Close unmaps name; a name that is not open is fine.
func (c Cryptsetup) Close(ctx context.Context, name string) error {
	if _, err := os.Stat(c.MappedPath(name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	_, err := c.run(ctx, nil, "close", name)
	return err
}

// Resize grows an open volume to its device's size.
func (c Cryptsetup) Resize(ctx context.Context, name string, key []byte) error {
	_, err := c.run(ctx, key, "resize", "--key-file", "-", name)
	return err
}
