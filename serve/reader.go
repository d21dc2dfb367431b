package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ralphloop/ralph/internal/usage"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// Reader is what every reading command (and the MCP server, and the web
// pages) reads: the store itself when no process holds it, or, while a
// running ralph holds it, that process through the store's socket. Code
// written against it has one path, and prints the same bytes either way.
//
// To add a read: add a method here, to LocalReader and to Client, when a
// reader needs one they do not offer.
type Reader interface {
	// The UI's reads (tui.Scanner): an action, its proof, a verification
	// of the whole chain, the chain in seq order.
	Get(actionID string) (ledger.Action, error)
	GetSeq(seq uint64) (ledger.Action, error)
	VerifyAction(ctx context.Context, seq uint64) (ledger.ActionProof, error)
	Verify(ctx context.Context, progress func(done, total uint64)) (ledger.VerifyReport, error)
	Range(fromSeq uint64, fn func(ledger.Action) error) error
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
	Served() *Info
	Close() error
}

// LocalReader is a store this process opened.
type LocalReader struct{ *ledger.Store }

func (l LocalReader) ListRuns() ([]loop.RunRecord, error) { return loop.ListRuns(l.Store) }
func (l LocalReader) Served() *Info                       { return nil }

// remoteReader is a store another ralph holds, read through its socket.
type remoteReader struct {
	*Client
	dir string // as the user named it, for messages
}

func (r remoteReader) Dir() string { return r.dir }

func (r remoteReader) Served() *Info {
	in := r.Info()
	return &in
}

// Reader is c as a Reader of the store dir (named as the user named it).
func (c *Client) Reader(dir string) Reader { return remoteReader{c, dir} }

// OpenReader opens the existing store dir for reading: through its socket
// when a running ralph serves it, else directly (OpenStore). opts tunes a
// direct open (Dir and ReadOnly are set here: a reader never writes). A
// store locked by a process whose socket does not answer is one whose
// ralph is closing it (its socket closes before Badger lets go of the
// lock) or has opened it and not yet begun to serve it: that is waited
// for, up to HeldWait, so a run that ends while it is read stays readable.
func OpenReader(ctx context.Context, dir string, opts ledger.Options, errOut io.Writer) (Reader, error) {
	opts.Dir, opts.ReadOnly = dir, true
	until := time.Now().Add(HeldWait)
	for {
		c, err := Dial(ctx, dir)
		if err == nil {
			return c.Reader(dir), nil
		}
		var he *HTTPError
		if errors.As(err, &he) {
			return nil, fmt.Errorf("the ralph process holding %s answered: %w", dir, err)
		}
		// Nothing serves it (no socket, or its process is gone): open it
		// here, which also clears a lock that process left.
		st, err := OpenStore(opts, errOut)
		if err == nil {
			return LocalReader{st}, nil
		}
		var locked *ledger.LockedError
		if !errors.As(err, &locked) || time.Now().After(until) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(heldPoll):
		}
	}
}

// HeldWait bounds how long OpenReader waits for a store whose holder
// serves no socket; heldPoll is how often it looks again.
const (
	HeldWait = 5 * time.Second
	heldPoll = 50 * time.Millisecond
)

// RunResolver is a Reader that holds one run whose id it has resolved
// already (a fleet run's rebuilt chain): ResolveRun takes its word.
type RunResolver interface {
	ResolvedRun() (id, started string)
}

// ResolveRun finds the run arg names in st: a run id, a unique prefix of
// one, or loop.LatestRun (the run started last); started is when it
// started (RFC 3339; "" when unknown). A run st does not hold, a prefix of
// several, and the latest of a store with no runs are usage errors. A
// chain imported without its run records is searched for the run's
// actions.
func ResolveRun(st Reader, arg string) (id, started string, err error) {
	if r, ok := st.(RunResolver); ok {
		id, started := r.ResolvedRun()
		return id, started, nil
	}
	recs, err := st.ListRuns()
	if err != nil {
		return "", "", err
	}
	recs = loop.ByStart(recs)
	i, err := loop.MatchRun(recs, func(r loop.RunRecord) string { return r.ID }, arg, "")
	switch {
	case err != nil:
		return "", "", err
	case i >= 0:
		return recs[i].ID, recs[i].Started, nil
	case arg == loop.LatestRun:
		return "", "", usage.Errorf("no runs in store %s yet; `ralph run` starts one", st.Dir())
	}
	// A chain imported without its run records: look for the run's actions.
	err = st.Range(1, func(a ledger.Action) error {
		if a.RunID == arg {
			return errFound
		}
		return nil
	})
	switch {
	case errors.Is(err, errFound):
		return arg, "", nil
	case err != nil:
		return "", "", err
	}
	return "", "", usage.Errorf("no run %s in this store; `ralph runs` lists them", arg)
}

// errFound ends a scan of the chain early.
var errFound = errors.New("found")
