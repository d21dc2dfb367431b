package tui

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// rowTexts is the chain pane's visible rows as plain text.
func rowTexts(m *model) []string {
	var out []string
	for _, idx := range m.tree.visible {
		out = append(out, strings.TrimSpace(ansi.Strip(m.chain.drawRow(idx, m.tree.at(idx), 100))))
	}
	return out
}

func TestTreeShape(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	m := testModel(t, st, false, 120, 40)
	feed(m, stored)
	m.Update(loadedMsg{})
	rows := rowTexts(m)
	// Closers do not get rows; finished iterations fold when the next starts.
	want := []string{"■ Run · Count to three", "▸ ○ Iteration 1  counted-to-three: predicate does not hold", "▸ ✗ Iteration 2", "▾ ○ Iteration 3", "✓ plan · static",
		"✓ governance · admission", "▾ ✓ Plan 3", "▾ ✓ Greet", "✓ ccos.echo", "▾ ✓ Count", "✓ kv.get", "✓ kv.put",
		"▾ ✓ Reserve", "✓ kv.put", "✓ Check", "■ stop conditions · STOP by enough", "■ Run stopped · enough"}
	if len(rows) != len(want) {
		t.Fatalf("rows:\n%s", strings.Join(rows, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(rows[i], want[i]) {
			t.Errorf("row %d = %q, want prefix %q", i, rows[i], want[i])
		}
	}
	if m.tree.n != int32(len(stored))-countClosers(stored) {
		t.Errorf("%d rows for %d actions with %d closers", m.tree.n, len(stored), countClosers(stored))
	}
	if len(m.tree.open) > 1 {
		t.Errorf("parent table holds %d entries after the run; want at most the last iteration's", len(m.tree.open))
	}
}

func countClosers(acts []ledger.Action) int32 {
	n := int32(0)
	for _, a := range acts {
		if closes(a.Type) {
			n++
		}
	}
	return n
}

func TestCompensationUnderItsStep(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(2, false))
	m := testModel(t, st, true, 120, 40)
	feed(m, stored)
	// Unfold iteration 2 and its plan: the compensation hangs under the
	// Reserve step it undoes, inserted before the later Check step.
	it2 := findRow(t, m, "Iteration 2")
	m.tree.setFolded(it2, false, true)
	m.chain.sync()
	rows := strings.Join(rowTexts(m), "\n")
	reserve := strings.Index(rows, "Reserve")
	comp := strings.Index(rows, "↺ compensate Release")
	check := strings.Index(rows, "✗ Check")
	if reserve < 0 || comp < reserve || check < comp {
		t.Fatalf("compensation not under Reserve, before Check:\n%s", rows)
	}
	if !strings.Contains(rows, "simulated failure in iteration 2") {
		t.Errorf("failed step shows no reason:\n%s", rows)
	}
}

func findRow(t *testing.T, m *model, label string) int32 {
	t.Helper()
	for i := int32(0); i < m.tree.n; i++ {
		if m.tree.at(i).label == label {
			return i
		}
	}
	t.Fatalf("no row %q", label)
	return -1
}

func TestKeysMoveFoldFollow(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	m := testModel(t, st, true, 120, 40)
	feed(m, stored)
	if !m.chain.follow || m.chain.cursor != len(m.tree.visible)-1 {
		t.Fatalf("follow mode does not keep the newest row selected: cursor %d of %d", m.chain.cursor, len(m.tree.visible))
	}
	press(m, "k")
	if m.chain.follow {
		t.Error("moving up still follows")
	}
	press(m, "g")
	if m.chain.cursor != 0 {
		t.Errorf("g: cursor %d", m.chain.cursor)
	}
	press(m, "down") // Iteration 1, folded
	n := len(m.tree.visible)
	press(m, "right")
	if len(m.tree.visible) <= n {
		t.Errorf("→ did not unfold Iteration 1: %d rows, was %d", len(m.tree.visible), n)
	}
	press(m, "left")
	if len(m.tree.visible) != n {
		t.Errorf("← did not fold Iteration 1 again: %d rows, want %d", len(m.tree.visible), n)
	}
	press(m, "G")
	if !m.chain.follow || m.chain.cursor != len(m.tree.visible)-1 {
		t.Error("G does not return to follow mode")
	}
	press(m, "f")
	if m.chain.follow {
		t.Error("f does not toggle follow off")
	}
	press(m, "tab")
	if m.focus != focusConds || !m.conds.focused || m.chain.focused {
		t.Errorf("tab: focus %d", m.focus)
	}
}

func TestFilter(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	m := testModel(t, st, true, 120, 40)
	feed(m, stored)
	press(m, "/")
	for _, r := range "type:call fn:kv.put" {
		press(m, string(r))
	}
	press(m, "enter")
	rows := rowTexts(m)
	if len(rows) != 6 { // kv.put twice per iteration
		t.Fatalf("filter rows:\n%s", strings.Join(rows, "\n"))
	}
	for _, r := range rows {
		if !strings.Contains(r, "kv.put") {
			t.Errorf("row %q does not match", r)
		}
	}
	if !strings.Contains(m.View(), "filter “type:call fn:kv.put”") {
		t.Error("the chain title does not show the filter")
	}
	press(m, "esc")
	if m.tree.filter != nil || len(m.tree.visible) == 6 {
		t.Error("esc does not clear the filter")
	}
	press(m, "/")
	for _, r := range "is:failed" {
		press(m, string(r))
	}
	press(m, "enter")
	if rows := rowTexts(m); len(rows) != 3 { // iteration 2, its plan, and its Check step
		t.Errorf("is:failed rows:\n%s", strings.Join(rows, "\n"))
	}
}

func TestTooSmall(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(1, false))
	m := testModel(t, st, true, 59, 30)
	feed(m, stored)
	if v := m.View(); !strings.Contains(v, "terminal too small (need 60×16)") || strings.Contains(v, "Causal chain") {
		t.Fatalf("59 columns:\n%s", v)
	}
	m.Update(sizeMsg(80, 15))
	if !strings.Contains(m.View(), "terminal too small") {
		t.Error("15 rows is drawn")
	}
	m.Update(sizeMsg(60, 16))
	v := m.View()
	if strings.Contains(v, "too small") || !strings.Contains(v, "Causal chain") {
		t.Errorf("60×16 is not drawn:\n%s", v)
	}
	for i, l := range strings.Split(v, "\n") {
		if w := ansi.StringWidth(l); w != 60 {
			t.Errorf("line %d is %d cells wide: %q", i, w, l)
		}
	}
	if n := strings.Count(v, "\n") + 1; n != 16 {
		t.Errorf("%d lines, want 16", n)
	}
}

func TestEveryViewFitsTheScreen(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	for _, size := range [][2]int{{60, 16}, {80, 24}, {120, 40}, {200, 60}} {
		m := testModel(t, st, true, size[0], size[1])
		feed(m, stored)
		m.Update(runDoneMsg{})
		for _, k := range []string{"", "v", "l", "?", "enter"} {
			if k != "" {
				press(m, k)
			}
			v := m.View()
			lines := strings.Split(v, "\n")
			if len(lines) != size[1] {
				t.Errorf("%v %q: %d lines", size, k, len(lines))
			}
			for i, l := range lines {
				if w := ansi.StringWidth(l); w != size[0] {
					t.Errorf("%v %q: line %d is %d cells: %q", size, k, i, w, l)
				}
			}
			press(m, "esc")
		}
	}
}

func TestRunEndAndQuit(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	m := testModel(t, st, true, 120, 40)
	m.hasDone = true
	feed(m, stored[:10])
	// q while the run goes on asks; y aborts the run and waits for its end.
	_, cmd := m.Update(keyMsg("q"))
	if !asking[quitMode](m) || m.quitting || isQuit(cmd) {
		t.Fatalf("q did not ask first (asking=%v quitting=%v)", asking[quitMode](m), m.quitting)
	}
	if v := m.View(); !strings.Contains(v, "y aborts the run · d detaches") {
		t.Errorf("no quit question:\n%s", v)
	}
	_, cmd = m.Update(keyMsg("y"))
	if m.quitting != true || isQuit(cmd) {
		t.Fatalf("y quit at once (quitting=%v)", m.quitting)
	}
	if !strings.Contains(m.View(), "Aborting…") {
		t.Error("no aborting notice")
	}
	feed(m, stored[10:])
	_, cmd = m.Update(runDoneMsg{})
	if !isQuit(cmd) {
		t.Error("the UI did not exit once the aborted run ended")
	}
	// Second press forces.
	m2 := testModel(t, st, true, 120, 40)
	m2.hasDone = true
	m2.Update(keyMsg("ctrl+c"))
	_, cmd = m2.Update(keyMsg("ctrl+c"))
	if !isQuit(cmd) || !m2.forced {
		t.Error("second press does not force the exit")
	}
	// A run that ends by itself shows why and waits for q.
	m3 := testModel(t, st, true, 120, 40)
	m3.hasDone = true
	feed(m3, stored)
	_, cmd = m3.Update(runDoneMsg{})
	if isQuit(cmd) {
		t.Error("the UI exited when the run ended")
	}
	v := m3.View()
	if !strings.Contains(v, "Stopped by enough (limit): max_iterations 3 reached") || !strings.Contains(v, "evidence: 3 iterations") {
		t.Errorf("no explanation:\n%s", v)
	}
	_, cmd = m3.Update(keyMsg("q"))
	if !isQuit(cmd) {
		t.Error("q after the end does not quit")
	}
}

// In a foreground UI q then d detaches and n stays; in an attached UI q
// detaches at once. Neither aborts the run.
func TestQuitDetaches(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	m := testModel(t, st, true, 120, 40)
	m.hasDone = true
	feed(m, stored[:10])
	m.Update(keyMsg("q"))
	if _, cmd := m.Update(keyMsg("n")); isQuit(cmd) || asking[quitMode](m) || m.quitting {
		t.Fatalf("n did not stay (asking=%v quitting=%v)", asking[quitMode](m), m.quitting)
	}
	m.Update(keyMsg("q"))
	if _, cmd := m.Update(keyMsg("d")); !isQuit(cmd) || !m.detached || m.aborting {
		t.Errorf("d did not detach (detached=%v aborting=%v)", m.detached, m.aborting)
	}
	a := testModel(t, st, true, 120, 40)
	a.attached = true
	feed(a, stored[:10])
	if !strings.Contains(a.View(), "q detach") {
		t.Errorf("the footer of an attached UI does not say q detaches:\n%s", a.View())
	}
	if _, cmd := a.Update(keyMsg("q")); !isQuit(cmd) || !a.detached || a.aborting {
		t.Errorf("q in an attached UI did not detach (detached=%v aborting=%v)", a.detached, a.aborting)
	}
	e := testModel(t, st, true, 120, 40)
	e.attached = true
	feed(e, stored)
	e.Update(runDoneMsg{})
	if v := e.View(); !strings.Contains(v, "q quit") || strings.Contains(v, "q detach") {
		t.Errorf("the footer of an attached UI after the run ended:\n%s", v)
	}
}

func isQuit(cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	_, ok := cmd().(tea.QuitMsg)
	return ok
}

func TestTransientEvents(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(1, false))
	m := testModel(t, st, true, 120, 40)
	m.approver = NewApprover()
	m.run = &localRun{Store: st, approver: m.approver} // answers only: no runner behind it
	feed(m, stored[:3])
	at := fixtureStart.Add(4*time.Minute + 12*time.Second)
	m.Update(eventsMsg{events: []loop.Event{{Kind: loop.EventWait, Until: at.Add(9 * time.Second), Text: "429 from the provider"}}})
	if v := m.View(); !strings.Contains(v, "Rate limited: retrying in 9s") || !strings.Contains(v, "429 from the provider") {
		t.Errorf("no countdown:\n%s", v)
	}
	m.Update(eventsMsg{events: []loop.Event{{Kind: loop.EventLog, Log: loop.LogLine{Msg: "pause requested"}}}})
	press(m, "l")
	if !strings.Contains(m.View(), "pause requested") {
		t.Error("log view does not show the log line")
	}
	press(m, "esc")
	plan := &loop.PlanInfo{Iteration: 2, Source: `(do (step "A" (call :ccos.echo {:message "x"})))`, Mode: "A", Repairs: 1}
	m.Update(eventsMsg{events: []loop.Event{{Kind: loop.EventApprove, Plan: plan}}})
	v := m.View()
	if !strings.Contains(v, "Run the plan for iteration 2") || !strings.Contains(v, "Plan awaiting approval") {
		t.Fatalf("no approve prompt:\n%s", v)
	}
	press(m, "y")
	select {
	case ans := <-m.approver.answers:
		if !ans.ok || ans.iteration != 2 {
			t.Errorf("answer %+v", ans)
		}
	default:
		t.Error("y did not answer the approver")
	}
	if m.approving() != nil {
		t.Error("prompt still shown after y")
	}
}

// Text from the run — a goal over two lines, a log line with a multi-line
// error, a tab — must not break the layout: every line stays a line.
func TestMultiLineTextKeepsTheLayout(t *testing.T) {
	t.Parallel()
	acts := scriptRun(1, false)
	acts[0].FunctionName = "Two line\ngoal\there"
	st, stored := fixtureStore(t, acts)
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		m := testModel(t, st, true, size[0], size[1])
		feed(m, stored)
		m.Update(eventsMsg{events: []loop.Event{{Kind: loop.EventLog, Log: loop.LogLine{Msg: "check failed\nsecond line",
			Attrs: "err=\"exit 1:\nstderr line\""}}}})
		for _, k := range []string{"", "l"} {
			if k != "" {
				press(m, k)
			}
			lines := strings.Split(m.View(), "\n")
			if len(lines) != size[1] {
				t.Errorf("%v %q: %d lines, want %d:\n%s", size, k, len(lines), size[1], strings.Join(lines, "\n"))
			}
			for i, l := range lines {
				if w := ansi.StringWidth(l); w != size[0] || strings.ContainsAny(l, "\t\r") {
					t.Errorf("%v %q: line %d is %d cells: %q", size, k, i, w, l)
				}
			}
			if !strings.HasPrefix(lines[0], " ralph ·") {
				t.Errorf("%v %q: the header is not the first line: %q", size, k, lines[0])
			}
		}
	}
}

// s between iterations (during loop.delay) has nothing to cancel: the
// runner ignores it, so the status line must not say the finished
// iteration was cancelled and recorded as skipped.
func TestSkipBetweenIterations(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(1, false))
	m := testModel(t, st, true, 120, 40)
	feed(m, stored) // iteration 1 completed and evaluated; the next has not started
	_, cmd := m.Update(keyMsg("s"))
	if cmd != nil {
		t.Error("s between iterations asks the runner to skip")
	}
	v := m.View()
	if strings.Contains(v, "cancelled and recorded as skipped") || !strings.Contains(v, "nothing to skip") {
		t.Errorf("status after s between iterations:\n%s", v)
	}
	// During an iteration, s skips it.
	m2 := testModel(t, st, true, 120, 40)
	feed(m2, stored[:8])
	if _, cmd := m2.Update(keyMsg("s")); cmd == nil {
		t.Error("s during an iteration does not ask the runner to skip")
	}
	if !strings.Contains(m2.View(), "Skip requested: iteration 1") {
		t.Errorf("status after s during iteration 1:\n%s", m2.View())
	}
}

// q while the abort confirmation is shown still quits (aborting the run
// and exiting once it has ended), as ctrl+c does.
func TestQuitDuringAbortConfirmation(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	m := testModel(t, st, true, 120, 40)
	m.hasDone = true
	feed(m, stored[:10])
	m.Update(keyMsg("a"))
	if !asking[abortMode](m) {
		t.Fatal("a does not ask for confirmation")
	}
	m.Update(keyMsg("q"))
	if !m.quitting || asking[abortMode](m) {
		t.Fatalf("q during the abort confirmation: quitting=%v asking=%v", m.quitting, asking[abortMode](m))
	}
	if _, cmd := m.Update(keyMsg("q")); !isQuit(cmd) || !m.forced {
		t.Error("a second q does not force the exit")
	}
}

// The background verification (detail view) ends with the UI: it holds
// the store's read lock, so a verification of a large store left running
// kept the caller's store.Close — and the process — waiting after q.
func TestVerifyEndsWithTheUI(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(1, false))
	m := testModel(t, st, false, 120, 40)
	feed(m, stored)
	ctx, cancel := context.WithCancel(context.Background())
	m.ctx = ctx
	cancel() // the UI has ended
	msg, ok := m.startVerify(false)().(verifyMsg)
	if !ok || !errors.Is(msg.err, context.Canceled) {
		t.Errorf("verification after the UI ended: %+v", msg)
	}
}

// Once the run has ended, p, a and s have nothing to control: the footer
// must not offer them.
func TestEndedRunOffersNoControls(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(3, true))
	m := testModel(t, st, true, 120, 40)
	m.hasDone = true
	feed(m, stored[:10])
	if v := m.View(); !strings.Contains(v, "p pause") {
		t.Fatalf("a running run's footer does not offer p:\n%s", v)
	}
	m.Update(keyMsg("a")) // the run ends while the abort question is open
	feed(m, stored[10:])
	m.Update(runDoneMsg{})
	if v := m.View(); strings.Contains(v, "Abort the run?") || !strings.Contains(v, "Stopped by enough") {
		t.Errorf("the abort question hides how the run ended:\n%s", v)
	}
	lines := strings.Split(m.View(), "\n")
	if footer := lines[len(lines)-1]; strings.Contains(footer, "pause") || strings.Contains(footer, "abort") {
		t.Errorf("the footer of an ended run offers controls: %q", footer)
	}
	press(m, "?")
	if v := m.View(); strings.Contains(v, "pause") || strings.Contains(v, "skip iteration") {
		t.Errorf("the help of an ended run lists the controls:\n%s", v)
	}
}

// Streamed text starts over when the provider retries or begins another
// attempt: the pane never shows two answers run together.
func TestStreamStartsOverOnRetryAndNextAttempt(t *testing.T) {
	t.Parallel()
	st, stored := fixtureStore(t, scriptRun(1, false))
	m := testModel(t, st, false, 120, 40)
	feed(m, stored)
	tok := func(s string) { m.event(&loop.Event{Kind: loop.EventToken, Text: s}) }
	m.iteration = 2 // a plan for the next iteration is being streamed
	tok("(do (step ")
	m.event(&loop.Event{Kind: loop.EventWait, Text: "500: retry 1 of 5", Until: time.Now().Add(time.Second)})
	tok("(do (step \"A\"")
	if m.plan.stream != "(do (step \"A\"" {
		t.Errorf("after a retry the stream is %q", m.plan.stream)
	}
	m.event(&loop.Event{Kind: loop.EventAction, Action: &ledger.Action{Type: ledger.LlmConsultation, Seq: 999, RunID: fixtureRun}})
	tok("{\"steps\"")
	if m.plan.stream != "{\"steps\"" {
		t.Errorf("after a finished attempt the stream is %q", m.plan.stream)
	}
}

func TestWrapWordsKeepsIDsWhole(t *testing.T) {
	t.Parallel()
	got := wrapWords("seq 12 shell.exec 0193a1b2-0000-7000-8000-000000000012 and more words here", 40)
	want := []string{"seq 12 shell.exec", "0193a1b2-0000-7000-8000-000000000012 and", "more words here"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("wrapWords = %q, want %q", got, want)
	}
	if got := wrapWords(strings.Repeat("x", 25), 10); len(got) != 3 || got[2] != "xxxxx" {
		t.Errorf("a long word: %q", got)
	}
}
