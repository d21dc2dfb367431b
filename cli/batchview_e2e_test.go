package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// ralph view of a batch run opens the batch view in a real terminal: one
// row per task, merged onto the prd's branch; enter opens a task's run in
// the run view, q comes back to the batch, q again exits 0.
var _ = suite.Add(e2e.Test{Name: "BatchViewInTerminal", Needs: []e2e.Need{e2e.Tool("git"), e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
	b := newBacklog(t, e)
	if out, errOut, code := b.ralph("run", "--tasks", "prd.json", "--parallel", "2", "--no-tui").Run(); code != 0 {
		t.Fatalf("run --tasks: exit %d\n%s\n%s", code, out, errOut)
	}
	runs, _, _ := b.ralph("runs", "--json").Run()
	var batch string
	for _, line := range strings.Split(strings.TrimSpace(runs), "\n") {
		var r struct {
			ID    string
			Tasks int
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Tasks == 3 {
			batch = r.ID
		}
	}
	if batch == "" {
		t.Fatalf("no batch in ralph runs:\n%s", runs)
	}
	tm := b.ralph("view", batch).Term()
	screen := tm.WaitIdle(e2e.UntilEnd)
	for _, want := range []string{"batch " + batch[:4], "Done", "3/3 merged", "onto ralph/greetings · 2 at a time", "2 at a time", "✓ US-001",
		"Greet in French", "✓ US-003", "onto ralph/greetings", "✓ Done: 3 of 3 merged", "enter open the task's run"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the batch view lacks %q:\n%s", want, screen)
		}
	}
	// The rows are in the order the tasks started (two at a time: either
	// of US-001 and US-002 first). j (down, one byte: an arrow's escape
	// sequence read in two parts by a slow -race binary is escape and two
	// letters) until the cursor is on US-002, each once the last was seen.
	cursorOn := func(s string) string {
		for _, l := range strings.Split(s, "\n") {
			if i := strings.Index(l, "›"); i >= 0 {
				if f := strings.Fields(l[i+len("›"):]); len(f) > 1 {
					return f[1]
				}
			}
		}
		return ""
	}
	for at, moves := cursorOn(screen), 0; at != "US-002"; moves++ {
		if moves == 3 {
			t.Fatalf("the cursor never reached US-002:\n%s", tm.Screen())
		}
		tm.Send("j")
		from := at
		tm.WaitScreen("the cursor moved from "+from, func(s string) bool { at = cursorOn(s); return at != from })
	}
	tm.Send("Enter")
	screen = tm.WaitFor("q back to the batch")
	for _, want := range []string{"US-002 try 1", "Done by done (success)", "Causal chain", "Stop conditions"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the run view of US-002 lacks %q:\n%s", want, screen)
		}
	}
	tm.Send("q")
	tm.WaitFor("✓ Done: 3 of 3 merged")
	tm.Send("q")
	if code := tm.Exit(); code != 0 {
		t.Errorf("ralph view exited %d, want 0:\n%s", code, tm.Screen())
	}
}})
