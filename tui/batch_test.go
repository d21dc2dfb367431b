package tui

import (
	"context"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/muesli/termenv"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

// observeAll gives b every action of acts up to (not including) the first
// for which stop holds.
func observeAll(b *batch, acts []ledger.Action, stop func(a *ledger.Action) bool) {
	for i := range acts {
		if stop != nil && stop(&acts[i]) {
			return
		}
		b.observe(&acts[i])
	}
}

// until is a stop for observeAll: the n-th (1-based) action of type typ
// in run.
func until(typ ledger.ActionType, run string, n int) func(a *ledger.Action) bool {
	return func(a *ledger.Action) bool {
		if a.Type == typ && a.RunID == run {
			n--
		}
		return n == 0
	}
}

func statuses(b *batch) map[string]string {
	out := map[string]string{}
	for _, t := range b.tasks {
		out[t.id] = t.status()
	}
	return out
}

func TestBatchStatuses(t *testing.T) {
	acts := scriptBatch()
	cases := []struct {
		name string
		stop func(a *ledger.Action) bool
		want map[string]string
	}{
		{"both running", until(ledger.IterationStarted, fixtureR1, 1), map[string]string{"US-001": taskRunning, "US-002": taskRunning}},
		{"green, in the queue", until(ledger.TaskMerged, fixtureBatch, 1), map[string]string{"US-001": taskMerging, "US-002": taskMerging}},
		{"one merged, one sent back", until(ledger.TaskStarted, fixtureBatch, 3),
			map[string]string{"US-001": ledger.TaskVerdictMerged, "US-002": taskBack}},
		{"the second run of US-002", until(ledger.RunStarted, fixtureR4, 1),
			map[string]string{"US-001": ledger.TaskVerdictMerged, "US-002": taskRunning, "US-003": taskRunning}},
		{"the end", nil, map[string]string{"US-001": ledger.TaskVerdictMerged, "US-002": ledger.TaskVerdictMerged, "US-003": ledger.TaskVerdictFailed}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBatch(fixtureBatch)
			observeAll(b, acts, c.stop)
			got := statuses(b)
			if len(got) != len(c.want) {
				t.Fatalf("tasks %v, want %v", got, c.want)
			}
			for id, w := range c.want {
				if got[id] != w {
					t.Errorf("%s is %q, want %q", id, got[id], w)
				}
			}
		})
	}
}

func TestBatchFigures(t *testing.T) {
	b := newBatch(fixtureBatch)
	observeAll(b, scriptBatch(), nil)
	if b.source != "prd:prd.json" || b.target != "ralph/greetings" || b.total != 3 || b.parallel != 2 || b.retries != 1 || b.integrate != "rebase" {
		t.Fatalf("batch: %+v", b)
	}
	want := []struct {
		id, title string
		runs, it  int
		cost      float64
		commit    string
	}{
		{"US-001", "Greet in English", 1, 1, 0.12, commitUS1},
		{"US-002", "Greet in French", 2, 2, 0.35, commitUS2},
		{"US-003", "Greet in German", 1, 3, 0.30, ""},
	}
	for i, w := range want {
		tk := b.tasks[i]
		it, cost := tk.figures()
		if tk.id != w.id || tk.title != w.title || len(tk.runs) != w.runs || it != w.it || cost < w.cost-1e-9 || cost > w.cost+1e-9 || tk.commit != w.commit {
			t.Errorf("task %d: %s %q, %d runs, %d iterations, $%.2f, commit %q; want %+v", i, tk.id, tk.title, len(tk.runs), it, cost, tk.commit, w)
		}
	}
	us2 := b.byID["US-002"]
	if r := us2.last(); r == nil || r.id != fixtureR4 {
		t.Errorf("US-002 opens %+v, want its merged run", r)
	}
	if r := us2.runs[0]; r.verdict != ledger.TaskVerdictConflict || r.final || !strings.Contains(r.why, "greet.go") {
		t.Errorf("US-002's first run: %+v", r)
	}
	us3 := b.byID["US-003"].runs[0]
	if us3.state != loop.StateFailed || us3.reason != "keeps-failing: 2 of 2 consecutive failures" || !strings.Contains(us3.whys, "keeps-failing") {
		t.Errorf("US-003's run: %+v", us3)
	}
	if n, _ := b.notStarted(); n != 0 || b.busy() {
		t.Errorf("not started %d, busy %v", n, b.busy())
	}
}

// A task with attempts ends as its best attempt: merged wins, then the
// end that got furthest; while one works, the task works.
func TestBatchAttempts(t *testing.T) {
	run := func(k int) string { return "0193a1b2-00a0-7000-8000-00000000000" + string(rune('0'+k)) }
	started := func(k int) ledger.Action {
		return ledger.Action{Type: ledger.TaskStarted, RunID: fixtureBatch, Metadata: map[string]rtfs.Value{ledger.MetaTask: rtfs.String("T"),
			ledger.MetaTaskRun: rtfs.String(run(k)), ledger.MetaTaskTry: rtfs.Int(1), ledger.MetaTaskAttempt: rtfs.Int(int64(k))}}
	}
	ended := func(k int, verdict string) ledger.Action {
		return ledger.Action{Type: ledger.TaskEnded, RunID: fixtureBatch, Metadata: map[string]rtfs.Value{ledger.MetaTask: rtfs.String("T"),
			ledger.MetaTaskRun: rtfs.String(run(k)), ledger.MetaTaskVerdict: rtfs.String(verdict), ledger.MetaTaskFinal: rtfs.Bool(true)}}
	}
	merged := ledger.Action{Type: ledger.TaskMerged, RunID: fixtureBatch, Metadata: map[string]rtfs.Value{ledger.MetaTask: rtfs.String("T"),
		ledger.MetaTaskRun: rtfs.String(run(2)), ledger.MetaTaskCommit: rtfs.String("abc")}}
	cases := []struct {
		name string
		acts []ledger.Action
		want string
	}{
		{"one works, one failed", []ledger.Action{started(1), started(2), ended(1, ledger.TaskVerdictFailed)}, taskRunning},
		{"the first merged wins", []ledger.Action{started(1), started(2), merged, ended(2, ledger.TaskVerdictMerged), ended(1, ledger.TaskVerdictCancelled)},
			ledger.TaskVerdictMerged},
		{"a conflict beats a failure", []ledger.Action{started(1), started(2), ended(1, ledger.TaskVerdictFailed), ended(2, ledger.TaskVerdictConflict)},
			ledger.TaskVerdictConflict},
		{"an end with no run", []ledger.Action{ended(0, ledger.TaskVerdictError)}, ledger.TaskVerdictError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBatch(fixtureBatch)
			observeAll(b, c.acts, nil)
			if got := b.byID["T"].status(); got != c.want {
				t.Errorf("T is %q, want %q", got, c.want)
			}
		})
	}
}

// batchNow is the fixed clock of the batch's tests.
func batchNow() time.Time { return fixtureStart.Add(4*time.Minute + 12*time.Second) }

// viewModel is the model ralph view RUN shows for st's run, read as View
// reads it (load), sized w×h.
func viewModel(t testing.TB, st *ledger.Store, run string, w, h int) *model {
	t.Helper()
	m := newModel(&Options{Store: st, RunID: run, Now: batchNow}, testStyles())
	m.update(sizeMsg(w, h))
	loadInto(t, m, st, run)
	return m
}

func testStyles() *styles { return newStyles(&strings.Builder{}, termenv.Ascii) }

// loadInto reads run from st into m as View's loader does (load, without
// following).
func loadInto(t testing.TB, m *model, st *ledger.Store, run string) {
	t.Helper()
	var msgs []tea.Msg
	load(context.Background(), st, run, func(msg tea.Msg) { msgs = append(msgs, msg) }, true, false)
	for _, msg := range msgs {
		drive(m, m.update(msg))
	}
}

// drive runs cmd and what follows from it as the program would, feeding
// the messages back through update, synchronously; the clock's and the
// title's ticks are left out.
func drive(m *model, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	switch msg := cmd().(type) {
	case nil, tickMsg, titleMsg:
	case tea.BatchMsg:
		for _, c := range msg {
			drive(m, c)
		}
	case taskRunMsg:
		if _, tick := msg.msg.(tickMsg); !tick {
			drive(m, m.update(msg))
		}
	default:
		drive(m, m.update(msg))
	}
}

// keys sends keys to m, one each, and drives what they start.
func keys(m *model, ks ...string) {
	for _, k := range ks {
		drive(m, m.update(keyMsg(k)))
	}
}

func recordedBatch(t *testing.T, w, h int) *model {
	t.Helper()
	acts := scriptBatch()
	rec := batchRecord(acts)
	st, _ := batchStore(t, acts, &rec)
	return viewModel(t, st, fixtureBatch, w, h)
}

func TestBatchViewRecorded(t *testing.T) {
	m := recordedBatch(t, 120, 40)
	if m.modes.screen() != m.batchV || m.batchV == nil {
		t.Fatalf("ralph view BATCH does not show the batch view: %T", m.modes.screen())
	}
	screen := m.View()
	for _, want := range []string{"batch 0193…b1", "Failed", "2/3 merged", "$0.77", "from prd:prd.json", "onto ralph/greetings",
		"2 at a time", "✓ US-001", "Greet in English", "as 3f2a1b0c9d", "✗ US-003", "failed", "keeps-failing: 2 of 2 consecutive failures",
		"try 1", "conflict in greet.go", "✗ Failed: 2 of 3 merged, 1 failed", "enter open the task's run"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the batch view lacks %q:\n%s", want, screen)
		}
	}
	if got := m.title(); got.runID != fixtureBatch || got.state != "ended" || got.seq != uint64(len(scriptBatch())) {
		t.Errorf("title %s", got)
	}
}

// A batch whose chain stops while its tasks work and that has no end on
// record was cut short: its working tasks show so.
func TestBatchViewInterrupted(t *testing.T) {
	acts := scriptBatch()
	n := 0
	for i := range acts {
		if acts[i].Type == ledger.RunStarted && acts[i].RunID == fixtureR4 {
			n = i + 1
		}
	}
	st, _ := batchStore(t, acts[:n], nil)
	m := viewModel(t, st, fixtureBatch, 120, 40)
	screen := m.View()
	for _, want := range []string{"Interrupted", "✓ US-001", "✗ US-002", "interrupted", "ralph resume " + fixtureBatch + " continues it",
		"1/3 merged"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the batch view lacks %q:\n%s", want, screen)
		}
	}
}

// enter opens the selected task's run in the run view (the merged one, or
// the run of a run's row); esc or q comes back; esc does not close the
// batch view itself, and views opened over it leave it under them.
func TestBatchViewKeys(t *testing.T) {
	m := recordedBatch(t, 120, 40)
	open := func(want string) *taskRunView {
		t.Helper()
		v, ok := m.modes.screen().(*taskRunView)
		if !ok || v.sub.runID != want {
			t.Fatalf("the screen is %T, want the run view of %s", m.modes.screen(), want)
		}
		if v.reading || v.sub.loading || v.sub.outcome == nil {
			t.Fatalf("the run of %s is not read to its end", want)
		}
		return v
	}
	keys(m, "enter")
	v := open(fixtureR1)
	if screen := m.View(); !strings.Contains(screen, "Done by done (success)") || !strings.Contains(screen, "q back to the batch") {
		t.Errorf("the run view of US-001:\n%s", screen)
	}
	if got := m.title(); got.runID != fixtureR1 || got.state != "ended" {
		t.Errorf("title %s in a task's run", got)
	}
	keys(m, "v") // the run's own history view, inside its view
	if v.sub.modes.screen() != v.sub.history || !strings.Contains(m.View(), "History · stop-condition evaluations") {
		t.Fatalf("v in a task's run:\n%s", m.View())
	}
	keys(m, "esc")
	open(fixtureR1)
	keys(m, "esc")
	if m.modes.screen() != m.batchV {
		t.Fatalf("esc went to %T, not the batch view", m.modes.screen())
	}
	// US-002, then its first run: try 1, which conflicted.
	keys(m, "down", "enter")
	open(fixtureR4)
	keys(m, "q")
	keys(m, "down", "enter")
	if v := open(fixtureR2); v.sub.iteration != 1 {
		t.Errorf("the first run of US-002 shows iteration %d", v.sub.iteration)
	}
	keys(m, "q")
	keys(m, "esc")
	if m.modes.screen() != m.batchV {
		t.Fatalf("esc closed the batch view of ralph view BATCH: %T", m.modes.screen())
	}
	keys(m, "?")
	if m.modes.screen() != m.helpV || !strings.Contains(m.View(), "Keys in the batch view") || !strings.Contains(m.View(), "batch 0193…b1") {
		t.Fatalf("? over the batch view:\n%s", m.View())
	}
	keys(m, "v", "esc")
	if m.modes.screen() != m.batchV {
		t.Fatalf("the history view opened from the help did not leave the batch view under it: %T", m.modes.screen())
	}
	if _, quit := m.update(keyMsg("q"))().(tea.QuitMsg); !quit {
		t.Error("q in the batch view does not quit")
	}
}

// A row with no run to open says so in the status line.
func TestBatchViewNoRun(t *testing.T) {
	acts := scriptBatch()[:1]
	acts = append(acts, ledger.Action{Type: ledger.TaskEnded, RunID: fixtureBatch, Timestamp: fixtureStart.Add(time.Second),
		Metadata: map[string]rtfs.Value{ledger.MetaTask: rtfs.String("US-009"), ledger.MetaTaskRun: rtfs.String(""),
			ledger.MetaTaskVerdict: rtfs.String(ledger.TaskVerdictError), ledger.MetaTaskWhy: rtfs.String("make its checkout: disk full"),
			ledger.MetaTaskFinal: rtfs.Bool(true)}})
	st, _ := batchStore(t, acts, nil)
	m := viewModel(t, st, fixtureBatch, 80, 24)
	keys(m, "enter")
	if m.modes.screen() != m.batchV || !strings.Contains(m.View(), "US-009 has no run to open") || !strings.Contains(m.View(), "disk full") {
		t.Fatalf("enter on a task with no run:\n%s", m.View())
	}
}

// b in a task's run view opens its batch over it, read in parts; enter
// opens a task's run from there, and esc comes back to the batch, then to
// the run.
func TestBatchOfRun(t *testing.T) {
	acts := scriptBatch()
	rec := batchRecord(acts)
	st, _ := batchStore(t, acts, &rec)
	m := viewModel(t, st, fixtureR4, 120, 40)
	if m.batchOf != fixtureBatch || !m.keys.Batch.Enabled() || !strings.Contains(m.View(), "b its batch") {
		t.Fatalf("a task's run does not offer its batch (%q):\n%s", m.batchOf, m.View())
	}
	keys(m, "b")
	v, ok := m.modes.screen().(*batchView)
	if !ok || v.pin || v.reading || len(v.b.tasks) != 3 || v.b.end == nil {
		t.Fatalf("b opened %T (%+v)", m.modes.screen(), v)
	}
	screen := m.View()
	for _, want := range []string{"batch 0193…b1", "Failed", "2/3 merged", "✗ Failed: 2 of 3 merged, 1 failed", "esc back", "✗ US-003"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the batch view from a task's run lacks %q:\n%s", want, screen)
		}
	}
	keys(m, "G", "enter")
	tv, ok := m.modes.screen().(*taskRunView)
	if !ok || tv.sub.runID != fixtureR3 || tv.sub.keys.Batch.Enabled() {
		t.Fatalf("enter opened %T", m.modes.screen())
	}
	keys(m, "esc")
	if m.modes.screen() != v {
		t.Fatalf("esc in the task's run went to %T", m.modes.screen())
	}
	keys(m, "esc")
	if m.modes.screen() != nil || !strings.Contains(m.View(), "Causal chain") {
		t.Fatalf("esc in the batch view went to %T, not the run", m.modes.screen())
	}
	plain := viewModel(t, st, fixtureBatch, 120, 40) // a batch's own view has no b
	if plain.keys.Batch.Enabled() {
		t.Error("b is offered where there is no task's run")
	}
}
