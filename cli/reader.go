package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/serve"
	"github.com/ralphloop/ralph/tui"
)

// storeReader is what every reading command reads: the store itself when
// no process holds it, or, while a running ralph holds it, that process
// through the store's socket. A command written against it has one code
// path, and prints the same bytes either way.
//
// To add a reading command: open the reader with openReader, read through
// these methods (add one here, to localReader and to serve.Client, when a
// command needs a read they do not offer), and close it.
type storeReader interface {
	tui.Scanner
	// Dir is the store directory, ID its id.
	Dir() string
	ID() string
	// VerifierKeyString is the store's verifier key (ralph chain key).
	VerifierKeyString() string
	// VerifyWith verifies the chain (Verify with a pinned key and saved
	// checkpoints); a held store is verified by its process up to a
	// consistent head.
	VerifyWith(ctx context.Context, opts ledger.VerifyOptions) (ledger.VerifyReport, error)
	// LatestCheckpoint and ProveInclusion: ralph chain checkpoint, prove.
	LatestCheckpoint() (ledger.Checkpoint, error)
	ProveInclusion(ctx context.Context, seq uint64) (ledger.InclusionProof, error)
	// ExportBundle writes the whole store as a bundle (ralph chain export
	// --bundle); a held store's process writes it up to a signed checkpoint.
	ExportBundle(w io.Writer) (int, error)
	// ListRuns is loop.ListRuns.
	ListRuns() ([]loop.RunRecord, error)
	// Select calls fn for every action f selects, in seq order.
	Select(f ledger.Filter, fn func(ledger.Action) error) error
	// ByRun returns a run's actions in seq order.
	ByRun(runID string) ([]ledger.Action, error)
	// Served says who serves the store: nil when this process opened it.
	Served() *serve.Info
	Close() error
}

// localReader is a store this process opened.
type localReader struct{ *ledger.Store }

func (l localReader) ListRuns() ([]loop.RunRecord, error) { return loop.ListRuns(l.Store) }
func (l localReader) Served() *serve.Info                 { return nil }

// remoteReader is a store another ralph holds, read through its socket.
type remoteReader struct {
	*serve.Client
	dir string // as the user named it, for messages
}

func (r remoteReader) Dir() string { return r.dir }

func (r remoteReader) Served() *serve.Info {
	in := r.Info()
	return &in
}

// openReader opens the existing store flag names for reading: through its
// socket when a running ralph serves it, else directly. opts tunes a
// direct open (Dir and ReadOnly are set here: a reading command never
// writes).
func openReader(ctx context.Context, flag string, opts ledger.Options, errOut io.Writer) (storeReader, error) {
	dir, err := existingStoreDir(flag)
	if err != nil {
		return nil, err
	}
	return openReaderAt(ctx, dir, opts, errOut)
}

// openReaderAt is openReader for the store directory dir, already named.
func openReaderAt(ctx context.Context, dir string, opts ledger.Options, errOut io.Writer) (storeReader, error) {
	c, err := serve.Dial(ctx, dir)
	if err == nil {
		return remoteReader{c, dir}, nil
	}
	var he *serve.HTTPError
	if errors.As(err, &he) {
		return nil, exitError(ExitFailure, fmt.Errorf("the ralph process holding %s answered: %w", dir, err))
	}
	// Nothing serves it (no socket, or its process is gone): open it here,
	// which also clears a lock that process left.
	opts.Dir, opts.ReadOnly = dir, true
	st, err := openStore(opts, errOut)
	if err != nil {
		return nil, err
	}
	return localReader{st}, nil
}

// heldStoreError explains a store another process holds: which process,
// and, when it serves the store, what to do instead of writing to it.
func heldStoreError(dir string, locked *ledger.LockedError) error {
	c, err := serve.Dial(context.Background(), dir)
	if err != nil {
		return exitError(ExitUsage, locked)
	}
	defer c.Close()
	in := c.Info()
	if in.RunID == "" {
		return exitError(ExitUsage, fmt.Errorf("store %s is in use by process %d (ralph); wait for it to end, or pass --store DIR to use another store", dir, in.PID))
	}
	return exitError(ExitUsage, fmt.Errorf("store %s is in use by process %d (ralph, running run %s); `ralph attach %s` shows it live, or pass --store DIR to use another store",
		dir, in.PID, in.RunID, in.RunID))
}
