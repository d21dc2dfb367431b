package cli_test

// Helpers the end-to-end tests share beyond the driver (internal/e2e):
// waiting for a condition, for an import's first commits, and for what a
// live run has recorded, which a terminal's UI is then waited on to have
// drawn (e2e.Term.WaitIdle).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/serve"
)

// waitUntil waits until cond holds (eventually.True, the one wait of the
// tests).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually.True(t, what, cond)
}

// waitCommitted waits until the Badger memtables glob
// names hold more than 4 MiB: an import's first chunks are committed.
func waitCommitted(t *testing.T, glob string) {
	t.Helper()
	waitUntil(t, "the import's first chunks committed", func() bool {
		mems, _ := filepath.Glob(glob)
		var size int64
		for _, m := range mems {
			if b, err := os.ReadFile(m); err == nil {
				size += int64(len(bytes.TrimRight(b, "\x00")))
			}
		}
		return size > 4<<20
	})
}

// errFound stops a walk of the chain at what it looked for.
var errFound = errors.New("found")

// seqOf waits until the run the process serving store drives has recorded
// an action of type typ named name (an iteration's start is named
// "iteration N", a step's by its name) and returns its seq: what a UI is
// then waited on to have drawn (e2e.Term.WaitIdle).
func seqOf(t *testing.T, store string, typ ledger.ActionType, name string) uint64 {
	t.Helper()
	var seq uint64
	waitUntil(t, fmt.Sprintf("%s %s recorded in %s", typ, name, store), func() bool {
		c, err := serve.Dial(context.Background(), store)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.Range(1, func(a ledger.Action) error {
			if a.Type == typ && a.FunctionName == name {
				seq = a.Seq
				return errFound
			}
			return nil
		})
		return seq != 0
	})
	return seq
}

// headOf waits until store is served and returns the seq of the last
// action recorded then.
func headOf(t *testing.T, store string) uint64 {
	t.Helper()
	var head uint64
	waitUntil(t, store+" served", func() bool {
		c, err := serve.Dial(context.Background(), store)
		if err != nil {
			return false
		}
		defer c.Close()
		head = c.Info().Head
		return true
	})
	return head
}

// waitIteration waits until the UI in tm has drawn the start of iteration
// n of the run store holds, and returns the screen, which shows it.
func waitIteration(t *testing.T, tm *e2e.Term, store string, n int) string {
	t.Helper()
	s := tm.WaitIdle(seqOf(t, store, ledger.IterationStarted, fmt.Sprintf("iteration %d", n)))
	if want := fmt.Sprintf("Iteration %d", n); !strings.Contains(s, want) {
		t.Fatalf("the UI, idle past the start of iteration %d, does not show %q:\n%s", n, want, s)
	}
	return s
}

// waitShown waits until the UI in tm has drawn everything the run store
// holds had recorded when it was asked, and returns the screen, which
// shows want.
func waitShown(t *testing.T, tm *e2e.Term, store, want string) string {
	t.Helper()
	s := tm.WaitIdle(headOf(t, store))
	if !strings.Contains(s, want) {
		t.Fatalf("the UI, idle at the run's head, does not show %q:\n%s", want, s)
	}
	return s
}
