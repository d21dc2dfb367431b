package serve

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ralphloop/ralph/internal/usage"
	"github.com/ralphloop/ralph/ledger"
)

// OpenStore opens the ledger store at opts.Dir for a command, and says so
// on errOut when it clears a lock a dead process left (or, read-only,
// reads past one) or rolls back an interrupted import. A store another
// process holds is a usage error naming that process and, when it serves
// the store, what to do instead; so is a directory that is no store. Any
// other error is the store's (a damaged store). A witness that cannot be
// written is a warning on errOut when it happens (unless opts already
// handles it).
func OpenStore(opts ledger.Options, errOut io.Writer) (*ledger.Store, error) {
	if !opts.ReadOnly && opts.OnWitnessError == nil {
		opts.OnWitnessError = func(e *ledger.WitnessError) { fmt.Fprintf(errOut, "ralph: warning: %v\n", e) }
	}
	stale := ledger.StaleLock(opts.Dir)
	s, err := ledger.Open(opts)
	var locked *ledger.LockedError
	var notStore *ledger.NotStoreError
	switch {
	case errors.As(err, &locked):
		return nil, heldStoreError(opts.Dir, locked)
	case errors.As(err, &notStore):
		return nil, usage.Wrap(err)
	case err != nil:
		return nil, err
	}
	if n := s.RolledBackImport(); n > 0 {
		fmt.Fprintf(errOut, "ralph: rolled back an interrupted import of %d actions in %s\n", n, opts.Dir)
	}
	switch {
	case stale > 0 && opts.ReadOnly:
		// A reader goes through a view of the store and changes nothing
		// in it, the lock included.
		fmt.Fprintf(errOut, "ralph: process %d, which is no longer running, left %s without closing it; it is read as it was left, and the next run or resume on it recovers it\n", stale, opts.Dir)
	case stale > 0:
		fmt.Fprintf(errOut, "ralph: cleared a stale lock on %s left by process %d, which is no longer running\n", opts.Dir, stale)
	}
	return s, nil
}

// heldStoreError explains a store another process holds: which process,
// and, when it serves the store, what to do instead of writing to it.
func heldStoreError(dir string, locked *ledger.LockedError) error {
	c, err := Dial(context.Background(), dir)
	if err != nil {
		return usage.Wrap(locked)
	}
	defer c.Close()
	in := c.Info()
	if in.RunID == "" {
		return usage.Errorf("store %s is in use by process %d (ralph); wait for it to end, or pass --store DIR to use another store", dir, in.PID)
	}
	return usage.Errorf("store %s is in use by process %d (ralph, running run %s); `ralph attach %s` shows it live, or pass --store DIR to use another store",
		dir, in.PID, in.RunID, in.RunID)
}
