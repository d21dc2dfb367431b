package ledger

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// Key files, relative to the store directory. The private key is PKCS #8
// and the public key PKIX, both PEM, so standard tools read them.
const (
	keyDir         = "keys"
	privateKeyFile = "ed25519"
	publicKeyFile  = "ed25519.pub"
)

// PublicKeyPath returns where the store in dir keeps its public key.
func PublicKeyPath(dir string) string { return filepath.Join(dir, keyDir, publicKeyFile) }

// ReadPublicKey reads the public key of the store in dir, for verifying
// checkpoints without opening the store.
func ReadPublicKey(dir string) (ed25519.PublicKey, error) {
	b, err := os.ReadFile(PublicKeyPath(dir))
	if err != nil {
		return nil, err
	}
	return parsePublicKey(b, PublicKeyPath(dir))
}

// loadOrCreateKey returns the store's signing key, creating the key pair on
// first use. The caller holds the store lock, so no other process races it.
func loadOrCreateKey(dir string, log *slog.Logger) (ed25519.PrivateKey, error) {
	privPath := filepath.Join(dir, keyDir, privateKeyFile)
	b, err := os.ReadFile(privPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return createKey(dir)
	case err != nil:
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	if fi, err := os.Stat(privPath); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("ledger signing key is readable by other users; run chmod 600", "path", privPath, "mode", fi.Mode().Perm().String())
	}
	priv, err := parsePrivateKey(b, privPath)
	if err != nil {
		return nil, err
	}
	pub := priv.Public().(ed25519.PublicKey)
	pubPath := PublicKeyPath(dir)
	pb, err := os.ReadFile(pubPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// The public key is derived data: write it again.
		return priv, writeFileAtomic(pubPath, encodePublicKey(pub), 0o644)
	case err != nil:
		return nil, fmt.Errorf("read public key: %w", err)
	}
	onDisk, err := parsePublicKey(pb, pubPath)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(onDisk, pub) {
		return nil, fmt.Errorf("public key %s does not match the private key beside it; restore the matching pair", pubPath)
	}
	return priv, nil
}

func createKey(dir string) (ed25519.PrivateKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, keyDir), 0o700); err != nil {
		return nil, fmt.Errorf("create key directory: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("encode signing key: %w", err)
	}
	privPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	// Public key first: a crash between the two leaves no private key, so the
	// next open starts over instead of finding a pair that does not match.
	if err := writeFileAtomic(PublicKeyPath(dir), encodePublicKey(pub), 0o644); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(dir, keyDir, privateKeyFile), privPEM, 0o600); err != nil {
		return nil, err
	}
	return priv, nil
}

func encodePublicKey(pub ed25519.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		// MarshalPKIXPublicKey only fails for key types it does not know.
		panic(fmt.Sprintf("encode ed25519 public key: %v", err))
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func parsePrivateKey(b []byte, path string) (ed25519.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("signing key %s is not a PEM \"PRIVATE KEY\"", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("signing key %s is a %T, not Ed25519", path, k)
	}
	return priv, nil
}

func parsePublicKey(b []byte, path string) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("public key %s is not a PEM \"PUBLIC KEY\"", path)
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", path, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("public key %s is a %T, not Ed25519", path, k)
	}
	return pub, nil
}

// writeFileAtomic writes b to path through a temporary file, fsync and
// rename, so a crash leaves either no file or the whole file.
func writeFileAtomic(path string, b []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
