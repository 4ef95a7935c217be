package vco

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// secretFileKeys are the files CredentialsFromDir reads: every key CredentialsFromSecret knows,
// caBundle included, and allowHTTP so that a copy still carrying it is refused by name.
var secretFileKeys = []string{SecretKeyURL, SecretKeyCustomer, SecretKeyJWT, SecretKeyClientID,
	SecretKeyClientSecret, SecretKeyIAMURL, SecretKeyCABundle, SecretKeyAllowHTTP}

// CredentialsFromDir reads a credential Secret mounted as files (one per key, as the kubelet
// writes a Secret volume) with the manager's rules: CredentialsFromSecret checks it, so the
// add-ons and the manager accept exactly the same Secrets, caBundle included. It reads the files
// on every call, so a rotated Secret counts as soon as the kubelet has updated them. Errors name
// files, never their contents.
func CredentialsFromDir(dir string) (Credentials, error) {
	data := map[string][]byte{}
	for _, k := range secretFileKeys {
		b, err := readSecretFile(filepath.Join(dir, k), maxSecretFile(k))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return Credentials{}, fmt.Errorf("credential %s: %w", filepath.Join(dir, k), err)
		}
		data[k] = b
	}
	creds, err := CredentialsFromSecret(data)
	if err != nil {
		return Credentials{}, fmt.Errorf("credential in %s (files named after the Secret's keys): %w", dir, err)
	}
	return creds, nil
}

// maxSecretFile bounds one file: a JWT is a few KiB; a CA bundle may hold a company's whole
// chain of intermediates, so it gets the size of a Secret.
func maxSecretFile(key string) int64 {
	if key == SecretKeyCABundle {
		return 1 << 20
	}
	return 64 << 10
}

func readSecretFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d KiB", limit>>10)
	}
	return b, nil
}
