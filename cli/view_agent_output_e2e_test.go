package cli_test

import (
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// ralph view of a finished agent loop (given no RUN_ID: the latest run)
// shows, on o, what its last agent call printed, replayed from the call's
// output file: its text and tool uses, and where the whole output is.
var _ = suite.Add(e2e.Test{Name: "ViewShowsRecordedAgentOutput", Needs: []e2e.Need{e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
	p := newAgentProject(t, e)
	if _, errOut, code := p.ralph("run", "--no-tui"); code != 0 {
		t.Fatalf("agent loop: exit %d: %s", code, errOut)
	}
	tm := p.cmd("view").Term()
	if s := tm.WaitIdle(e2e.UntilEnd); !strings.Contains(s, "o output/plan") { // o is offered once the run's agent calls have loaded
		t.Fatalf("the loaded view does not offer o:\n%s", s)
	}
	tm.Send("o")
	screen := tm.WaitFor("All steps are done.")
	for _, want := range []string{"Edit", "whole output: logs/"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the output pane lacks %q:\n%s", want, screen)
		}
	}
}})
