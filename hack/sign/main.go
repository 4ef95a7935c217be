// Command sign signs release files offline with an ECDSA P-256 key: for each FILE it writes
// FILE.sig, the base64 ASN.1 signature of the file's SHA-256, which is what
// `cosign verify-blob --key KEY.pub --signature FILE.sig FILE` checks, and what
// `openssl dgst -sha256 -verify KEY.pub -signature <(base64 -d FILE.sig) FILE` checks without
// cosign (docs/release.md). Keyless signing needs the internet; this needs a key file only.
//
//	go run ./hack/sign -generate-key DIR                # writes DIR/signing.key (0600) and DIR/signing.pub
//	go run ./hack/sign -key signing.key FILE...         # signs
//	go run ./hack/sign -verify signing.pub FILE...      # checks FILE.sig
//
// A snapshot signs with a key generated for it (make release-snapshot); a release signs with
// the project's key (CAPX_SIGNING_KEY), whose public half is published.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	gen := flag.String("generate-key", "", "write a new key pair into this folder: signing.key (PEM, 0600) and signing.pub")
	key := flag.String("key", "", "PEM EC private key (P-256) to sign the FILEs with")
	pub := flag.String("verify", "", "PEM public key to check each FILE.sig with, instead of signing")
	flag.Parse()
	var err error
	switch {
	case *gen != "" && *key == "" && *pub == "" && flag.NArg() == 0:
		err = generate(*gen)
	case *key != "" && *pub == "" && flag.NArg() > 0:
		err = signFiles(*key, flag.Args())
	case *pub != "" && *key == "" && flag.NArg() > 0:
		err = verifyFiles(*pub, flag.Args())
	default:
		err = errors.New("give -generate-key DIR, or -key KEY FILE..., or -verify PUB FILE... (go run ./hack/sign -h)")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sign:", err)
		os.Exit(1)
	}
}

func generate(dir string) error {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "signing.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "signing.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
}

func readKey(path string) (*ecdsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "EC PRIVATE KEY" {
		return nil, fmt.Errorf("%s: want a PEM EC PRIVATE KEY (go run ./hack/sign -generate-key DIR writes one)", path)
	}
	k, err := x509.ParseECPrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if k.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%s: the key is not P-256, which cosign and this check expect", path)
	}
	return k, nil
}

func readPublic(path string) (*ecdsa.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%s: want a PEM PUBLIC KEY", path)
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ec, ok := k.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%s: a %T, not an ECDSA key", path, k)
	}
	return ec, nil
}

func digest(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h := sha256.Sum256(b)
	return h[:], nil
}

func signFiles(keyPath string, files []string) error {
	k, err := readKey(keyPath)
	if err != nil {
		return err
	}
	for _, f := range files {
		d, err := digest(f)
		if err != nil {
			return err
		}
		sig, err := ecdsa.SignASN1(rand.Reader, k, d)
		if err != nil {
			return err
		}
		if err := os.WriteFile(f+".sig", []byte(base64.StdEncoding.EncodeToString(sig)), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "sign: %s.sig\n", f)
	}
	return nil
}

func verifyFiles(pubPath string, files []string) error {
	pub, err := readPublic(pubPath)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files {
		if err := verify(pub, f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func verify(pub *ecdsa.PublicKey, f string) error {
	d, err := digest(f)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(f + ".sig")
	if err != nil {
		return fmt.Errorf("%s is not signed: %w", f, err)
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("%s.sig: not base64: %w", f, err)
	}
	if !ecdsa.VerifyASN1(pub, d, sig) {
		return fmt.Errorf("%s: the signature does not match this file and key", f)
	}
	return nil
}
