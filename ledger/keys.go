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

// Key files. The private key is PKCS #8 and the public key PKIX, both PEM,
// so standard tools read them. A store keeps no private key: the key lives
// in a key directory outside it (by default $XDG_CONFIG_HOME/ralph/keys),
// one file per store named after the store id, or in a file the caller
// names. Stores made before keys moved out kept the pair in <store>/keys/;
// such a store keeps being signed with that key until `ralph chain key
// --move` moves it out (MoveLegacyKey).
const (
	keyDir         = "keys"
	privateKeyFile = "ed25519"
	publicKeyFile  = "ed25519.pub"
	keyFileSuffix  = ".ed25519"
)

// PublicKeyPath returns where a store made before keys moved out keeps its
// public key (PEM); newer stores record theirs in the database (chain key).
func PublicKeyPath(dir string) string { return filepath.Join(dir, keyDir, publicKeyFile) }

// LegacyKeyPath returns where a store made before keys moved out keeps its
// private key.
func LegacyKeyPath(dir string) string { return filepath.Join(dir, keyDir, privateKeyFile) }

// DefaultKeyDir returns $XDG_CONFIG_HOME/ralph/keys (os.UserConfigDir).
func DefaultKeyDir() (string, error) {
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the key directory: %w; set XDG_CONFIG_HOME or pass --key FILE", err)
	}
	return filepath.Join(d, "ralph", "keys"), nil
}

// StoreKeyPath returns the private key file of the store with id in keyDir.
func StoreKeyPath(keyDir, id string) string { return filepath.Join(keyDir, id+keyFileSuffix) }

// ReadPublicKey reads the PEM public key a store made before keys moved
// out keeps in dir/keys.
func ReadPublicKey(dir string) (ed25519.PublicKey, error) {
	b, err := os.ReadFile(PublicKeyPath(dir))
	if err != nil {
		return nil, err
	}
	return parsePublicKey(b, PublicKeyPath(dir))
}

// ReadPrivateKey reads a PEM PKCS #8 Ed25519 private key.
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	return parsePrivateKey(b, path)
}

// loadOrCreateKeyFile returns the private key in path, creating it (mode
// 0600, its directory 0700) when it does not exist. Only a store opened for
// writing calls it.
func loadOrCreateKeyFile(path string, log *slog.Logger) (ed25519.PrivateKey, bool, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		priv, err := createKeyFile(path)
		return priv, true, err
	case err != nil:
		return nil, false, fmt.Errorf("read signing key: %w", err)
	}
	warnMode(path, log)
	priv, err := parsePrivateKey(b, path)
	return priv, false, err
}

func warnMode(path string, log *slog.Logger) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("ledger signing key is readable by other users; run chmod 600", "path", path, "mode", fi.Mode().Perm().String())
	}
}

func createKeyFile(path string) (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create key directory: %w", err)
	}
	if err := writeFileAtomic(path, encodePrivateKey(priv), 0o600); err != nil {
		return nil, err
	}
	return priv, nil
}

// legacyKey returns the private key a store made before keys moved out
// keeps inside itself, or nil when it has none. The public key beside it
// must match.
func legacyKey(dir string, log *slog.Logger) (ed25519.PrivateKey, error) {
	path := LegacyKeyPath(dir)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	warnMode(path, log)
	priv, err := parsePrivateKey(b, path)
	if err != nil {
		return nil, err
	}
	pub, err := ReadPublicKey(dir)
	if err == nil && !bytes.Equal(pub, priv.Public().(ed25519.PublicKey)) {
		return nil, fmt.Errorf("public key %s does not match the private key beside it; restore the matching pair", PublicKeyPath(dir))
	}
	return priv, nil
}

// MoveLegacyKey moves the private key a store made before keys moved out
// keeps in dir/keys/ed25519 to dest (mode 0600), so that the store holds
// only its public key. dest must not exist. The store must not be open.
func MoveLegacyKey(dir, dest string) error {
	src := LegacyKeyPath(dir)
	priv, err := ReadPrivateKey(src)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store %s keeps no private key (%s does not exist): nothing to move", dir, src)
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(dest); err == nil {
		return fmt.Errorf("%s already exists; move it away or pass another --key FILE", dest)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return fmt.Errorf("create key directory: %w", err)
	}
	if err := writeFileAtomic(dest, encodePrivateKey(priv), 0o600); err != nil {
		return err
	}
	if err := os.Remove(src); err != nil {
		return fmt.Errorf("remove %s after copying it to %s: %w", src, dest, err)
	}
	return nil
}

func encodePrivateKey(priv ed25519.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		// MarshalPKCS8PrivateKey only fails for key types it does not know.
		panic(fmt.Sprintf("encode ed25519 private key: %v", err))
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
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
	// The rename is durable once the directory is.
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write %s: sync its directory: %w", path, err)
	}
	return nil
}
