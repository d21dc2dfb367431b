package cli_test

import (
	"strings"
	"testing"
)

// ralph view of a finished agent loop (given no RUN_ID: the latest run)
// shows, on o, what its last agent call printed, replayed from the call's
// output file: its text and tool uses, and where the whole output is.
func TestE2EViewShowsRecordedAgentOutput(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	p := newAgentProject(t)
	if _, errOut, code := p.ralph(t, "run", "--no-tui"); code != 0 {
		t.Fatalf("agent loop: exit %d: %s", code, errOut)
	}
	var env []string
	for _, e := range p.env {
		if strings.HasPrefix(e, "XDG_") {
			env = append(env, e)
		}
	}
	tm := newTmux(t, "cd "+p.dir+" && "+strings.Join(env, " ")+" "+ralphBin+" view; sleep 30")
	if s := tm.waitIdle(untilEnd); !strings.Contains(s, "o output/plan") { // o is offered once the run's agent calls have loaded
		t.Fatalf("the loaded view does not offer o:\n%s", s)
	}
	tm.send("o")
	screen := tm.waitFor("All steps are done.")
	for _, want := range []string{"Edit", "whole output: logs/"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the output pane lacks %q:\n%s", want, screen)
		}
	}
}
