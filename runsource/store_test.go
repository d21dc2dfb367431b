package runsource

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// recorded runs the quickstart loop into a store in a new directory and
// closes it, as a `ralph run` that has ended leaves it.
func recorded(t *testing.T) (dir, runID string) {
	t.Helper()
	for _, v := range []string{"XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "HOME"} {
		t.Setenv(v, t.TempDir())
	}
	cfg, err := config.Load("../examples/quickstart/ralph.toml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(t.TempDir(), "store")
	run, err := assemble.NewRun(context.Background(), cfg, assemble.RunOptions{Dir: dir,
		Open: func() (*ledger.Store, error) { return ledger.Open(ledger.Options{Dir: dir}) }})
	if err != nil {
		t.Fatal(err)
	}
	run.Options.Logger = slog.New(slog.DiscardHandler)
	r, err := run.NewRunner()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := run.Store.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, r.RunID()
}

func TestStoreSource(t *testing.T) {
	dir, id := recorded(t)
	ctx := context.Background()
	s := Store{Dir: func() (string, error) { return dir, nil }, ErrOut: io.Discard, RunsHint: "list_runs gives the ids"}
	runs, err := s.Runs(ctx)
	if err != nil || len(runs) != 1 || runs[0].ID != id || runs[0].State != loop.StateDone {
		t.Fatalf("Runs: %v, %v; want the one done run %s", runs, err, id)
	}
	for _, arg := range []string{id, id[:8], loop.LatestRun} {
		r, err := s.Run(ctx, arg)
		if err != nil {
			t.Fatalf("Run(%q): %v", arg, err)
		}
		if r.ID != id || r.Live || s.Steerable(r) || s.Approves(r) {
			t.Errorf("Run(%q): id %s live %v steerable %v; want %s, not live", arg, r.ID, r.Live, s.Steerable(r), id)
		}
		if err := s.Steer(ctx, r, "pause", 0); err == nil || !strings.Contains(err.Error(), "is not running") {
			t.Errorf("Steer of an ended run: %v, want it is not running", err)
		}
		if _, err := s.Events(ctx, r, 0); err == nil || !strings.Contains(err.Error(), "is not running") {
			t.Errorf("Events of an ended run: %v, want it is not running", err)
		}
		r.Close()
	}
	if _, err := s.Run(ctx, "ffffffff"); err == nil || !strings.HasSuffix(err.Error(), "; list_runs gives the ids") {
		t.Errorf("an unknown run: %v, want the hint at the end", err)
	}
	none := Store{Dir: func() (string, error) { return filepath.Join(t.TempDir(), "none"), nil }, ErrOut: io.Discard}
	if _, err := none.Runs(ctx); err == nil || !strings.Contains(err.Error(), "no store at") {
		t.Errorf("a store not made yet: %v, want no store at", err)
	}
}
