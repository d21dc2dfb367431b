package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/sandbox"
	"github.com/ralphloop/ralph/serve"
)

// The store a command uses, from its flags: where it is, and opening it
// to write (openStore) or to read (openReader: the store, or the socket
// of the ralph holding it, as serve.Reader).

// storeDir applies the precedence --store > RALPH_STORE > store.dir > ./.ralph.
func storeDir(flag string, c *config.Config) string {
	switch {
	case flag != "":
		return flag
	case os.Getenv("RALPH_STORE") != "":
		return os.Getenv("RALPH_STORE")
	case c != nil && c.File != "" && c.Store.Dir != "":
		return c.Store.Dir
	}
	return ".ralph"
}

// commandStoreDir names the store a command uses: --store, else
// RALPH_STORE, else ./ralph.toml's store.dir, else ./.ralph.
// Only store.dir matters here, so a [model] that could not plan is no
// error (as for exec).
func commandStoreDir(flag string) (string, error) {
	cfg, err := loadExecConfig("")
	if err != nil {
		return "", err
	}
	dir := storeDir(flag, cfg)
	// Under a [sandbox] the default store lives in ralph's state
	// directory, unless only the one in the workdir exists (its runs ran
	// with --sandbox off); without one, there when only that one exists
	// (its runs ran with --sandbox).
	sandboxed := assemble.Sandboxed(cfg)
	if moved, ok, err := assemble.StorePlace(asSandboxed(cfg), dir, flag != ""); err == nil && ok &&
		(sandboxed && (!storeIsNew(moved) || storeIsNew(dir)) || !sandboxed && storeIsNew(dir) && !storeIsNew(moved)) {
		dir = moved
	}
	return dir, nil
}

// asSandboxed is cfg as a run with --sandbox auto would see it.
func asSandboxed(cfg *config.Config) *config.Config {
	if assemble.Sandboxed(cfg) {
		return cfg
	}
	c := *cfg
	c.Sandbox = &config.Sandbox{Mode: string(sandbox.Auto)}
	return &c
}

// existingStoreDir is commandStoreDir for a store that must already exist.
func existingStoreDir(flag string) (string, error) {
	dir, err := commandStoreDir(flag)
	if err != nil {
		return "", err
	}
	// An empty directory holds no store either: reading it must not leave a
	// new, empty store behind.
	if storeIsNew(dir) {
		return "", exitError(ExitUsage, fmt.Errorf("no store at %s; run a plan first or pass --store DIR", dir))
	}
	return dir, nil
}

// storeIsNew reports whether dir holds no store yet (missing or empty).
func storeIsNew(dir string) bool {
	entries, err := os.ReadDir(dir)
	return errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0)
}

// existingStore opens a store that must already exist, read-only: a
// reading command never creates a store, reads or creates a private key,
// or changes a file.
func existingStore(flag string, errOut io.Writer) (*ledger.Store, error) {
	dir, err := existingStoreDir(flag)
	if err != nil {
		return nil, err
	}
	return openStore(ledger.Options{Dir: dir, ReadOnly: true}, errOut)
}

// openStore opens the ledger store at opts.Dir (serve.OpenStore, which says
// what it found on errOut). A store opened for writing signs with RALPH_KEY
// when no key is named, and its witness is kept in the default place; every
// store's close that passes its bound is noted for Run to report (ends.go).
func openStore(opts ledger.Options, errOut io.Writer) (*ledger.Store, error) {
	if !opts.ReadOnly && !opts.InMemory {
		if opts.KeyFile == "" {
			opts.KeyFile = os.Getenv("RALPH_KEY")
		}
		if opts.WitnessDir == "" {
			if wd, err := ledger.DefaultWitnessDir(); err == nil {
				opts.WitnessDir = wd
			}
		}
	}
	opts.OnCloseStuck = noteStuck
	s, err := serve.OpenStore(opts, errOut)
	if err != nil {
		return nil, commandError(err)
	}
	if !opts.ReadOnly {
		keepStore(s)
	}
	return s, nil
}

// openReader opens the existing store flag names for reading: through its
// socket when a running ralph serves it, else directly. opts tunes a
// direct open.
func openReader(ctx context.Context, flag string, opts ledger.Options, errOut io.Writer) (serve.Reader, error) {
	dir, err := existingStoreDir(flag)
	if err != nil {
		return nil, err
	}
	return openReaderAt(ctx, dir, opts, errOut)
}

// openReaderAt is openReader for the store directory dir, already named.
func openReaderAt(ctx context.Context, dir string, opts ledger.Options, errOut io.Writer) (serve.Reader, error) {
	opts.OnCloseStuck = noteStuck
	r, err := serve.OpenReader(ctx, dir, opts, errOut)
	if err != nil {
		return nil, commandError(err)
	}
	return r, nil
}
