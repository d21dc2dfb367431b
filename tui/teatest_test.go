package tui

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// quickstart wires examples/quickstart/ralph.toml as `ralph run` does
// (assemble.NewRun), on an in-memory store.
func quickstart(t *testing.T, approver *Approver) (*loop.Runner, *ledger.Store, *config.Config) {
	t.Helper()
	cfg, err := config.Load("../examples/quickstart/ralph.toml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	run, err := assemble.NewRun(context.Background(), cfg, assemble.RunOptions{Open: assemble.InMemory})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Store.Close() })
	run.Options.Logger = slogDiscard()
	if approver != nil {
		run.Options.Approve = approver.Approve
	}
	r, err := run.NewRunner()
	if err != nil {
		t.Fatal(err)
	}
	return r, run.Store, cfg
}

// liveProgram starts the UI for r under teatest, with the forwarder the
// real Run uses, and starts the run.
func liveProgram(t *testing.T, r *loop.Runner, st *ledger.Store, cfg *config.Config, approver *Approver) *teatest.TestModel {
	t.Helper()
	done := Start(func() error { _, err := r.Run(context.Background()); return err })
	o := &Options{Run: Local(r, st, approver), Store: st, Config: cfg, Done: done, Approver: approver}
	m := newModel(o, newStyles(&bytes.Buffer{}, termenv.Ascii))
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 40))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go forward(ctx, o.Run.Events(ctx, 0), tm.Send, false)
	return tm
}

// waitScreen waits (generously: never a timing assertion) until the
// output shows every want.
func waitScreen(t *testing.T, tm *teatest.TestModel, want ...string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		for _, w := range want {
			if !bytes.Contains(b, []byte(w)) {
				return false
			}
		}
		return true
	}, teatest.WithDuration(60*time.Second), teatest.WithCheckInterval(20*time.Millisecond))
}

func TestTeaQuickstartDone(t *testing.T) {
	r, st, cfg := quickstart(t, nil)
	tm := liveProgram(t, r, st, cfg, nil)
	waitScreen(t, tm, "Done by counted-to-three (success)", "the completion predicate held")
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(60*time.Second)).(*model)
	if fm.state != loop.StateDone || fm.iteration != 3 || fm.forced {
		t.Errorf("final model: state %s iteration %d forced %v", fm.state, fm.iteration, fm.forced)
	}
	if fm.conds.eval == nil || !fm.conds.eval.ShouldStop {
		t.Error("the conditions pane never got the last evaluation")
	}
	// The compensation of iteration 2 hangs under its Reserve step.
	var comp bool
	for i := int32(0); i < fm.tree.n; i++ {
		comp = comp || strings.Contains(fm.tree.at(i).label, "compensate Release")
	}
	if !comp {
		t.Error("no compensation row")
	}
}

func TestTeaPauseShowsPaused(t *testing.T) {
	approver := NewApprover()
	r, st, cfg := quickstart(t, approver)
	tm := liveProgram(t, r, st, cfg, approver)
	key := func(s string) { tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}) }
	// The run waits for approval of iteration 1: ask for a pause, approve;
	// the pause takes effect before the first step.
	waitScreen(t, tm, "Run the plan for iteration 1")
	key("p")
	waitScreen(t, tm, "Pausing")
	key("y")
	waitScreen(t, tm, "Paused", "p resumes")
	if !r.Paused() {
		t.Error("the runner is not paused")
	}
	key("p")
	for _, it := range []string{"2", "3"} {
		waitScreen(t, tm, "Run the plan for iteration "+it)
		key("y")
	}
	waitScreen(t, tm, "Done by counted-to-three")
	key("q")
	tm.WaitFinished(t, teatest.WithFinalTimeout(60*time.Second))
}

func TestTeaHistoryView(t *testing.T) {
	r, st, cfg := quickstart(t, nil)
	tm := liveProgram(t, r, st, cfg, nil)
	waitScreen(t, tm, "Done by counted-to-three")
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("v")})
	waitScreen(t, tm, "History · stop-condition evaluations", "Iteration 3", "STOP (success) by counted-to-three",
		"fired: counted-to-three")
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	tm.WaitFinished(t, teatest.WithFinalTimeout(60*time.Second))
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }
