package tui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// batchView is the batch view (DESIGN §23): one row per task with where
// it stands, its iterations, spend, elapsed time and why, under the
// batch's source, target and counts; a task the merge queue sent back, or
// one with attempts, lists its runs under it. enter opens the selected
// task's run in the run view (a taskRunView over this one); esc and q
// come back. It draws the header and status line too (framer).
type batchView struct {
	st *styles
	b  *batch
	// pinned: ralph view BATCH opened it, and the UI is it: nothing is
	// under it to go back to, and the views opened over it leave it open.
	pin     bool
	cursor  int        // the selected item
	offset  int        // the first line shown
	h       int        // the lines the list has
	items   []batchRow // what the cursor moves over, made again when b.ver changes
	itemVer int
	cache   rowCache[batchRow, batchRowVer, []string]
	note    string // said in the status line until the next key
	// A view the UI's load does not feed (b) reads its batch in parts.
	reading bool
	read    int // actions read
	readErr error
}

// batchRow is a line the cursor stops on: a task, or one of its runs.
type batchRow struct {
	t *batchTask
	r *taskRun // nil: the task's own row
}

// batchRowVer is what a row's text depends on besides the width.
type batchRowVer struct {
	ver  int
	secs int64 // its elapsed seconds, while it works
	gone bool  // the batch no longer goes on: what worked was cut short
}

func newBatchView(st *styles, b *batch, pin bool) *batchView {
	return &batchView{st: st, b: b, pin: pin, itemVer: -1}
}

func (*batchView) layer() layer { return layerScreen }

// pinned keeps the view under the views opened over it (show).
func (v *batchView) pinned() bool { return v.pin }

func (v *batchView) key(m *model, k tea.KeyMsg) (bool, tea.Cmd) {
	v.note = ""
	v.sync() // the rows as they are now, drawn or not
	ks := &m.keys
	switch {
	case key.Matches(k, ks.Detail):
		return true, m.openTaskRun(v)
	case key.Matches(k, ks.Back):
		if !v.pin {
			m.modes.remove(v)
		}
	case key.Matches(k, ks.Quit):
		return true, m.askQuit()
	case key.Matches(k, ks.Help):
		m.toggleHelp()
	default:
		m.scrollKey(k, v)
	}
	return true, nil
}

// scrollBy moves the cursor (the scroll keys and the mouse wheel).
func (v *batchView) scrollBy(d int) {
	v.cursor = min(max(v.cursor+d, 0), max(0, len(v.items)-1))
}

// selected is the row under the cursor.
func (v *batchView) selected() (batchRow, bool) {
	if v.cursor >= len(v.items) {
		return batchRow{}, false
	}
	return v.items[v.cursor], true
}

func (v *batchView) footer(k *keyMap) []key.Binding {
	b := []key.Binding{k.move, openRunKey}
	if !v.pin {
		b = append(b, k.Back)
	}
	return append(b, k.Help, k.Quit)
}

func (v *batchView) keysHelp(k *keyMap) (string, []helpGroup) {
	keys := []key.Binding{openRunKey}
	if !v.pin {
		keys = append(keys, k.Back)
	}
	return "Keys in the batch view", []helpGroup{scrollGroup(k), {"This view", append(keys, k.Help, k.Quit)}}
}

// openRunKey is enter in the batch view.
var openRunKey = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open the task's run"))

// sync makes the rows again when the batch changed: each task, and under
// a task with more than one run, each run.
func (v *batchView) sync() {
	if v.itemVer == v.b.ver {
		return
	}
	sel, _ := v.selected()
	v.items, v.itemVer = v.items[:0], v.b.ver
	for _, t := range v.b.tasks {
		v.items = append(v.items, batchRow{t: t})
		if len(t.runs) > 1 {
			for _, r := range t.runs {
				v.items = append(v.items, batchRow{t: t, r: r})
			}
		}
	}
	for i, it := range v.items { // the cursor stays on its row
		if it == sel {
			v.cursor = i
		}
	}
	v.scrollBy(0)
}

// source is how the view reads its batch: the UI's own load for the
// page (ralph view BATCH), else the parts it reads itself (b in a task's
// run, readBatch).
func (v *batchView) source(m *model) (loading bool, read int, err error) {
	if v.pin {
		return m.loading, m.loaded, m.loadErr
	}
	return v.reading, v.read, v.readErr
}

// follows reports whether the batch is shown as it goes on.
func (v *batchView) follows(m *model) bool { return v.pin && m.following }

// goesOn reports whether the batch is still at work as far as the view
// knows: it is being read, or followed, or goes on elsewhere.
func (v *batchView) goesOn(m *model) bool {
	loading, _, _ := v.source(m)
	return v.b.end == nil && (loading || (v.pin && (m.following || m.goesOn != "")))
}

// now is the time the batch's running figures count to: now while it
// goes on, else its last action's.
func (v *batchView) now(m *model) time.Time {
	if loading, _, _ := v.source(m); v.goesOn(m) && !loading {
		return m.now()
	}
	return v.b.last
}

func (v *batchView) body(m *model, width, height int) []string {
	v.sync()
	b, st := v.b, v.st
	inner := width - 2
	from, onto := v.place()
	head := []string{
		" " + cut(from, inner-1),
		" " + cut(onto, inner-1),
		" " + cut(v.counts(), inner-1),
		st.dim.Render(" " + cut(columns(inner-1, "", "task", "title", "state", "iter", "cost", "time"), inner-1)),
	}
	v.h = max(0, height-2-len(head))
	lines, at := v.lines(m, inner)
	// Keep the cursor's row in view: its first line and, where they fit, the rest.
	if first := at[v.cursor]; first < v.offset {
		v.offset = first
	} else if end := at[v.cursor+1]; end > v.offset+v.h {
		v.offset = max(first, end-v.h)
	}
	v.offset = min(v.offset, max(0, len(lines)-v.h))
	rows := append(head, lines[v.offset:min(len(lines), v.offset+v.h)]...)
	if len(b.tasks) == 0 {
		rows = append(rows, st.dim.Render(" no task has started yet"))
	}
	right := fmt.Sprintf("%d of %d tasks", len(b.tasks), b.total)
	return st.frame("Batch · "+b.id, right, true, width, height, rows)
}

// lines draws every row (the cached ones from the cache) and says where
// each starts: at[i] is item i's first line, at[len(items)] the end.
func (v *batchView) lines(m *model, w int) ([]string, []int) {
	b := v.b
	now, gone := v.now(m), !v.goesOn(m)
	var out []string
	at := make([]int, 0, len(v.items)+1)
	for i, it := range v.items {
		at = append(at, len(out))
		ver := batchRowVer{ver: it.t.ver, gone: gone}
		if active(it.t.status()) && !gone {
			ver.secs = int64(it.t.elapsed(now) / time.Second)
		}
		rows := v.cache.get(it, w, ver, false, func() []string { return v.drawRow(it, now, gone, w) })
		for j, l := range rows {
			if j == 0 && i == v.cursor {
				l = v.st.accent.Render("›") + v.st.selected.Render(ansi.Strip(l[1:]))
			}
			out = append(out, l)
		}
	}
	at = append(at, len(out))
	if n, status := b.notStarted(); n > 0 {
		out = append(out, " "+v.st.dim.Render(cut(fmt.Sprintf("%s %d not started: %s", markOf(v.st, status), n, notStartedWhy(status)), w-1)))
	}
	if len(at) == 1 { // no item: the cursor's row is the end
		at = append(at, 0)
	}
	return out, at
}

func notStartedWhy(status string) string {
	if status == ledger.TaskVerdictBlocked {
		return "blocked, a task they depend on did not merge"
	}
	return "queued"
}

// place is where the batch's tasks come from, and where they go and how
// the batch runs them.
func (v *batchView) place() (from, onto string) {
	b := v.b
	var how []string
	if b.parallel > 0 {
		how = append(how, strconv.Itoa(b.parallel)+" at a time")
	}
	if b.integrate != "" {
		how = append(how, b.integrate)
	}
	how = append(how, plural(b.retries, "retry", "retries"))
	if b.attempts > 1 {
		how = append(how, strconv.Itoa(b.attempts)+" attempts each")
	}
	return "from " + clean(b.source), "onto " + clean(b.target) + v.st.dim.Render(" · "+strings.Join(how, " · "))
}

// counts is how many tasks stand where.
func (v *batchView) counts() string {
	b := v.b
	n := b.count()
	parts := []string{fmt.Sprintf("%d of %d merged", n[ledger.TaskVerdictMerged], b.total)}
	for _, s := range []string{taskRunning, taskMerging, taskBack, ledger.TaskVerdictConflict, ledger.TaskVerdictFailed,
		ledger.TaskVerdictStopped, ledger.TaskVerdictError, ledger.TaskVerdictAborted, ledger.TaskVerdictCancelled} {
		if n[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[s], statusWord(s)))
		}
	}
	if k, status := b.notStarted(); k > 0 {
		parts = append(parts, fmt.Sprintf("%d %s", k, status))
	}
	return strings.Join(parts, " · ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// columns lays a row out: mark, task id, title, state, iterations, cost,
// elapsed; the title takes what the others leave.
func columns(w int, mark, id, title, state, iter, cost, elapsed string) string {
	const idW, stateW, iterW, costW, timeW = 10, 13, 5, 8, 7
	titleW := max(8, w-2-idW-stateW-iterW-costW-timeW-1)
	return fit(mark, 2) + fit(id, idW) + fit(title, titleW) + " " + fit(state, stateW) + padLeft(iter, iterW) +
		padLeft(cost, costW) + padLeft(elapsed, timeW)
}

// drawRow draws a task's row (and its why under it) or one of its runs'.
func (v *batchView) drawRow(it batchRow, now time.Time, gone bool, w int) []string {
	st := v.st
	if it.r != nil {
		row, why := v.runRow(it.r, now, gone, w-1)
		if why == "" {
			return []string{" " + row}
		}
		return []string{" " + row, st.dim.Render(cut("       "+why, w))}
	}
	t := it.t
	status := shownStatus(t.status(), gone)
	iters, cost := t.figures()
	style := styleOf(st, status)
	row := columns(w-1, style.Render(markOf(st, status)), t.id, clean(t.title), style.Render(statusWord(status)), strconv.Itoa(iters),
		fmt.Sprintf("$%.2f", cost), fmtClock(t.elapsed(now)))
	out := []string{" " + row}
	if why := v.taskWhy(t, status); why != "" {
		out = append(out, st.dim.Render(cut("     "+clean(why), w)))
	}
	return out
}

// runRow is one run of a task with several: which try (and attempt),
// how it ended, its iterations, spend and time; and why, for the line
// under it.
func (v *batchView) runRow(r *taskRun, now time.Time, gone bool, w int) (row, why string) {
	status := r.verdict // a run's row says how it ended, even when its task goes on
	if status == "" {
		status = shownStatus(r.status(), gone)
	}
	name := "try " + strconv.Itoa(r.try)
	if r.attempt > 1 || v.b.attempts > 1 {
		name = "#" + strconv.Itoa(r.attempt) + " " + name
	}
	if r.id == "" {
		name = "no run"
	}
	why = r.why
	if why == "" && status == taskMerging {
		why = "in the merge queue: " + r.reason
	}
	style := styleOf(v.st, status)
	row = columns(w, style.Render(markOf(v.st, status)), v.st.dim.Render("  "+name), "", style.Render(statusWord(status)),
		strconv.Itoa(r.iteration), fmt.Sprintf("$%.2f", r.cost), fmtClock(r.elapsed(now)))
	return row, clean(why)
}

// taskWhy is the line under a task: why it ended so, or what it does.
func (v *batchView) taskWhy(t *batchTask, status string) string {
	r := t.latest()
	switch status {
	case ledger.TaskVerdictMerged:
		why := "as " + shortCommit(t.commit) + " onto " + v.b.target
		if n := len(t.runs); n > 1 {
			why += fmt.Sprintf(", on its run %d of %d", slices.Index(t.runs, r)+1, n)
		}
		if r != nil && r.why != "" {
			why += "; " + r.why
		}
		return why
	}
	if r == nil {
		return ""
	}
	switch status {
	case taskInterrupted:
		return "cut short in iteration " + strconv.Itoa(r.iteration) + " when the batch stopped"
	case taskRunning:
		why := "iteration " + strconv.Itoa(r.iteration)
		if r.iteration == 0 {
			why = "starting"
		}
		if r.try > 1 {
			why = "try " + strconv.Itoa(r.try) + " · " + why
		}
		if r.whys != "" {
			why += " · " + r.whys
		}
		return why
	case taskMerging:
		return "its conditions held (" + r.reason + "): in the merge queue"
	case taskBack:
		return "back to its loop: " + r.why
	}
	return r.why
}

func shortCommit(c string) string {
	if len(c) > 10 {
		return c[:10]
	}
	return c
}

// shownStatus is a status as the view says it: a task at work in a batch
// that no longer goes on was cut short.
func shownStatus(status string, gone bool) string {
	if gone && active(status) {
		return taskInterrupted
	}
	return status
}

// statusWord is a status as the state column says it.
func statusWord(status string) string {
	switch status {
	case taskMerging:
		return "merge queue"
	case taskBack:
		return "back to loop"
	}
	return status
}

// markOf is the marker a status is drawn with, so it reads without
// colour too.
func markOf(st *styles, status string) string {
	switch status {
	case ledger.TaskVerdictMerged:
		return "✓"
	case taskRunning:
		return "⟳"
	case taskMerging:
		return "»"
	case taskBack:
		return "↺"
	case ledger.TaskVerdictStopped:
		return "■"
	case ledger.TaskVerdictQueued, ledger.TaskVerdictBlocked, ledger.TaskVerdictCancelled:
		return "·"
	}
	return "✗"
}

// styleOf colours a status's row.
func styleOf(st *styles, status string) lipgloss.Style {
	switch status {
	case ledger.TaskVerdictMerged:
		return st.ok
	case taskRunning, taskMerging, taskBack:
		return st.running
	case ledger.TaskVerdictStopped, ledger.TaskVerdictCancelled:
		return st.warn
	}
	return st.fail
}

// header is the batch's first line: its id, state, merged of total,
// elapsed time and spend.
func (v *batchView) header(m *model) string {
	st, b := v.st, v.b
	n := b.count()
	var cost float64
	for _, t := range b.tasks {
		_, c := t.figures()
		cost += c
	}
	end := v.now(m)
	if b.end != nil && !b.end.at.IsZero() {
		end = b.end.at
	}
	elapsed := "--:--"
	if !b.started.IsZero() {
		elapsed = fmtClock(end.Sub(b.started))
	}
	parts := []string{st.bold.Render("ralph"), "batch " + shortID(b.id), v.badge(m), fmt.Sprintf("%d/%d merged", n[ledger.TaskVerdictMerged], b.total),
		elapsed, fmt.Sprintf("$%.2f", cost)}
	if !v.follows(m) {
		parts = append(parts, st.dim.Render("read-only"))
	}
	return fit(" "+strings.Join(parts, st.dim.Render(" · ")), m.w)
}

// badge is the batch's state.
func (v *batchView) badge(m *model) string {
	st, b := v.st, v.b
	switch {
	case b.end != nil:
		style := st.stateOK
		switch b.end.state {
		case loop.StateFailed, loop.StateAborted:
			style = st.stateFail
		case loop.StateStopped:
			style = st.stateLimit
		}
		return style.Render(titleCase(b.end.state))
	case v.reading || (v.pin && m.loading):
		return st.stateIdle.Render("Reading")
	case v.goesOn(m):
		return st.stateRun.Render("Running")
	}
	return st.stateFail.Render("Interrupted")
}

// status is the status line under the batch view: a note on the last
// key, how the batch ended, or what it does.
func (v *batchView) status(m *model) []string {
	st, b := v.st, v.b
	quit := st.dim.Render(" · q quits")
	switch {
	case v.note != "":
		return []string{st.statusAlert.Render(" " + v.note)}
	}
	loading, read, err := v.source(m)
	switch {
	case loading:
		return []string{st.dim.Render(fmt.Sprintf(" Reading the batch from the store… %d actions", read))}
	case err != nil:
		return []string{st.fail.Render(" ✗ Reading the batch failed: "+firstLine(err.Error())) + quit}
	case b.end != nil:
		mark, style := "■", st.statusAlert
		switch b.end.state {
		case loop.StateDone:
			mark, style = "✓", st.statusOK
		case loop.StateFailed, loop.StateAborted:
			mark, style = "✗", st.fail
		}
		return []string{style.Render(fmt.Sprintf(" %s %s: %s", mark, titleCase(b.end.state), b.end.reason)) + quit}
	case v.follows(m):
		return []string{st.dim.Render(" The batch goes on in " + m.goesOn + "; shown as it records")}
	case v.pin && m.goesOn != "":
		return []string{st.dim.Render(" The batch goes on in "+m.goesOn+"; this shows what it recorded until now") + quit}
	}
	return []string{st.statusAlert.Render(" ✗ Interrupted: the batch has no end on record") +
		st.dim.Render(" · ralph resume "+b.id+" continues it") + quit}
}
