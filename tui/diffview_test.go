package tui

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

// runDiffCmds runs cmd and feeds the model the summaries and diffs it
// produces, as the program would.
func runDiffCmds(m *model, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	switch msg := cmd().(type) {
	case tea.BatchMsg:
		for _, c := range msg {
			runDiffCmds(m, c)
		}
	case diffStatMsg, diffMsg:
		_, next := m.Update(msg)
		runDiffCmds(m, next)
	}
}

// A run with checkpoints shows each iteration's +added −deleted on its
// row, and D on a row shows its iteration's diff, scrollable; esc goes back.
func TestIterationDiff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	repo, err := gitx.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := gitx.NewCheckpointer(repo, fixtureRun, dir)
	if err != nil {
		t.Fatal(err)
	}
	commits := map[int]string{}
	for n, text := range []string{"one\ntwo\nthree\n", "one\n2\nthree\nfour\n", "one\n2\nthree\nfour\n"} {
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if commits[n], err = cp.Checkpoint(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Parse([]byte("[loop]\nworkdir = \""+dir+"\"\n[plan]\nrtfs = \"(do 1)\"\n"), filepath.Join(dir, "ralph.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	acts := scriptRun(2, false)
	for i := range acts {
		a := &acts[i]
		switch a.Type {
		case ledger.RunStarted:
			a.Metadata["config"] = rtfs.String(cfg.Snapshot())
			a.Metadata[loop.MetaCheckpoint] = rtfs.String(commits[0])
		case ledger.IterationCompleted:
			a.Metadata[loop.MetaCheckpoint] = rtfs.String(commits[int(a.Metadata["iteration"].AsInt())])
		}
	}
	st, stored := fixtureStore(t, acts)
	m := testModel(t, st, true, 120, 40)
	evs := make([]loop.Event, len(stored))
	for i := range stored {
		evs[i] = loop.Event{Kind: loop.EventAction, Action: &stored[i], Time: stored[i].Timestamp}
	}
	_, cmd := m.Update(eventsMsg{events: evs})
	runDiffCmds(m, cmd)
	screen := m.View()
	if !strings.Contains(screen, "Iteration 1  +2 −1") || !strings.Contains(screen, "Iteration 2  +0 −0 · iteration-2.rtfs") {
		t.Fatalf("the iteration rows carry no +added −deleted summary:\n%s", screen)
	}

	selectSeq(t, m, stored[findSeq(stored, ledger.IterationStarted, 1)].Seq)
	_, cmd = m.Update(keyMsg("D"))
	if m.modes.screen() != m.diff {
		t.Fatal("D did not open the diff view")
	}
	runDiffCmds(m, cmd)
	screen = m.View()
	for _, want := range []string{"Diff · iteration 1", "-two", "+2", "+four", "@@"} {
		if !strings.Contains(screen, want) {
			t.Fatalf("the diff view lacks %q:\n%s", want, screen)
		}
	}
	lines := strings.Split(screen, "\n")
	if len(lines) != 40 {
		t.Errorf("the diff view is %d lines, want 40", len(lines))
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w != 120 {
			t.Errorf("line %d of the diff view is %d cells, want 120", i, w)
		}
	}
	press(m, "?") // the help lists the keys that act in the diff view, not the panes'
	if screen = m.View(); !strings.Contains(screen, "Keys in the diff view") || strings.Contains(screen, "Panes") {
		t.Fatalf("? in the diff view does not list its keys:\n%s", screen)
	}
	press(m, "esc")
	if m.modes.screen() != m.diff {
		t.Fatal("esc from the help did not go back to the diff view")
	}
	press(m, "G")
	press(m, "esc")
	if m.modes.screen() != nil {
		t.Fatal("esc did not close the diff view")
	}
}

// findSeq is the index in acts of the IterationStarted of iteration it.
func findSeq(acts []ledger.Action, typ ledger.ActionType, it int) int {
	for i := range acts {
		if acts[i].Type == typ && acts[i].Metadata["iteration"].AsInt() == int64(it) {
			return i
		}
	}
	return -1
}
