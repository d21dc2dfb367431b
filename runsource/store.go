package runsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/usage"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/mcpserver"
	"github.com/ralphloop/ralph/serve"
)

// Store is a local store as a source.
type Store struct {
	// Dir names the store's directory, asked anew on each request (the
	// command's --store, RALPH_STORE, store.dir, ./.ralph).
	Dir func() (string, error)
	// ErrOut takes what opening a store says (a lock cleared).
	ErrOut io.Writer
	// OnCloseStuck is called when a store's close passes its bound.
	OnCloseStuck func(*ledger.StuckError)
	// RunsHint ends the sentence for a run the store does not hold, with
	// where its user finds the ids ("list_runs gives the ids").
	RunsHint string
}

// Open opens the store for one request: through its socket when a
// running ralph serves it, else read-only.
func (s Store) Open(ctx context.Context) (serve.Reader, error) {
	dir, err := s.Dir()
	if err != nil {
		return nil, err
	}
	if storeIsNew(dir) {
		return nil, usage.Errorf("no store at %s; run a plan first or pass --store DIR", dir)
	}
	return serve.OpenReader(ctx, dir, ledger.Options{OnCloseStuck: s.OnCloseStuck}, s.ErrOut)
}

// storeIsNew reports whether dir holds no store yet (missing or empty).
func storeIsNew(dir string) bool {
	entries, err := os.ReadDir(dir)
	return errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0)
}

// Store opens the whole store for one request.
func (s Store) Store(ctx context.Context) (mcpserver.Reader, error) { return s.Open(ctx) }

// Run opens the run id names (a unique prefix, or loop.LatestRun).
func (s Store) Run(ctx context.Context, id string) (*mcpserver.Run, error) {
	st, err := s.Open(ctx)
	if err != nil {
		return nil, err
	}
	r, err := RunOf(st, id, s.RunsHint)
	if err != nil {
		return nil, err
	}
	if info := st.Served(); info != nil && info.RunID == r.ID {
		r.Live, r.State = true, info.State
	} else if drives(info, r.Record) {
		r.Live = true // a task run of the batch the process drives: its events are live
	}
	return r, nil
}

// drives says whether the process info describes runs rec now: its own
// run, or a run of the batch it drives that has not ended.
func drives(info *serve.Info, rec loop.RunRecord) bool {
	if info == nil {
		return false
	}
	running := rec.State == loop.StateRunning || rec.State == loop.StatePaused
	return info.RunID == rec.ID || info.Batch != "" && running && (rec.ID == info.Batch || rec.Batch == info.Batch)
}

// Steerable says whether r's controls reach it: the process serving the
// store drives r itself (a batch's task runs take no controls).
func (s Store) Steerable(r *mcpserver.Run) bool {
	st, ok := r.Reader.(serve.Reader)
	if !ok {
		return false
	}
	info := st.Served()
	return info != nil && info.RunID == r.ID
}

// Approves says whether r takes plan approvals from a page: its process
// asks for them over the socket (ralph run --approve).
func (s Store) Approves(r *mcpserver.Run) bool {
	st, ok := r.Reader.(serve.Reader)
	return ok && s.Steerable(r) && st.Served().Approves
}

// Runs lists every run of the store, oldest first.
func (s Store) Runs(ctx context.Context) ([]loop.RunRecord, error) {
	st, err := s.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return st.ListRuns()
}

// Served is who serves the store now (nil: no process holds it).
func (s Store) Served(ctx context.Context) (*serve.Info, error) {
	st, err := s.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return st.Served(), nil
}

// Control sends do (pause, resume, skip, abort) to the run.
func (s Store) Control(ctx context.Context, r *mcpserver.Run, do string) error {
	return s.Steer(ctx, r, do, 0)
}

// Steer sends do to the run, which must be running now: pause, resume,
// skip, abort, or approve and decline (iteration's plan).
func (s Store) Steer(ctx context.Context, r *mcpserver.Run, do string, iteration int) error {
	c, err := s.live(ctx, r)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Control(ctx, do, iteration)
}

// live dials the process that runs r now.
func (s Store) live(ctx context.Context, r *mcpserver.Run) (*serve.Client, error) {
	st := r.Reader.(serve.Reader)
	if !s.Steerable(r) {
		if drives(st.Served(), r.Record) {
			return nil, fmt.Errorf("run %s is a task of batch %s, whose tasks take no controls of their own", r.ID, r.Record.Batch)
		}
		return nil, fmt.Errorf("run %s is not running (its state is %s); only the loop a ralph process runs now can be steered", r.ID, r.Record.State)
	}
	return serve.Dial(ctx, st.Dir())
}

// Events streams the live run r's events from the chain's seq from, until
// ctx ends or the run's process goes (the channel then closes). The stream
// holds its own connection: r may be closed once it has started.
func (s Store) Events(ctx context.Context, r *mcpserver.Run, from uint64) (<-chan loop.Event, error) {
	st := r.Reader.(serve.Reader)
	if !drives(st.Served(), r.Record) {
		return nil, fmt.Errorf("run %s is not running (its state is %s); its page shows what it recorded", r.ID, r.Record.State)
	}
	c, err := serve.Dial(ctx, st.Dir())
	if err != nil {
		return nil, err
	}
	ch, err := c.Events(ctx, from, false)
	if err != nil {
		c.Close()
		return nil, err
	}
	return closeAfter(ctx, ch, c), nil
}

// Diff reads the run's checkpoints of iterations it-1 and it.
func (s Store) Diff(ctx context.Context, r *mcpserver.Run, acts []ledger.Action, it int) ([]gitx.FileStat, string, string) {
	files, diff, err := loop.IterationDiff(ctx, r.ID, acts, it)
	if err != nil {
		return nil, "", err.Error()
	}
	return files, diff, ""
}

// RunOf finds the run id names in st (a unique prefix, or loop.LatestRun);
// st is closed when it does not hold it. hint ends the sentence for a run
// st does not hold.
func RunOf(st serve.Reader, id, hint string) (*mcpserver.Run, error) {
	full, _, err := serve.ResolveRun(st, id)
	if err != nil {
		st.Close()
		if strings.HasPrefix(err.Error(), "no run ") {
			return nil, usage.Errorf("no run %s in store %s; %s", id, st.Dir(), hint)
		}
		return nil, err
	}
	return &mcpserver.Run{Reader: st, ID: full, Record: runRecord(st, full)}, nil
}

// runRecord is id's record, or one with the id alone (a chain imported
// without its run records).
func runRecord(st serve.Reader, id string) loop.RunRecord {
	runs, _ := st.ListRuns() // best effort: the chain itself is read next
	for _, r := range runs {
		if r.ID == id {
			return r
		}
	}
	return loop.RunRecord{ID: id}
}

// closeAfter forwards in until it closes, then closes c.
func closeAfter(ctx context.Context, in <-chan loop.Event, c io.Closer) <-chan loop.Event {
	out := make(chan loop.Event, 64)
	go func() { // ends with in, which ends with ctx or the connection
		defer close(out)
		defer c.Close()
		for e := range in {
			select {
			case out <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
