package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/ralphloop/ralph/stop"
)

// historyView is the verbose debugging view (v): every stop-condition
// evaluation of the run, oldest first. For each iteration it shows each
// condition's progress change, duration, cache hit or timeout, and the
// condition that fired with its reason and evidence. Evaluations are read
// from the store when the view opens, not kept in memory.
type historyView struct {
	fullScreen
	st      *styles
	entries []histEntry
	total   int
	err     error
	loading bool
	offset  int
	h       int
	ver     int                               // bumped when new evaluations are set
	cache   rowCache[struct{}, int, []string] // the content, kept as one row
	text    []string                          // the content as last drawn
	// replay, by iteration, is another stop configuration's verdicts
	// (ralph view --replay), shown under the recorded ones.
	replay     map[int]*stop.ReplayStep
	replayRes  *stop.ReplayResult
	replayName string
}

func (h *historyView) setReplay(r *stop.ReplayResult, name string) {
	if r == nil {
		return
	}
	h.replayRes, h.replayName, h.replay = r, name, map[int]*stop.ReplayStep{}
	for i := range r.Steps {
		h.replay[r.Steps[i].Iteration] = &r.Steps[i]
	}
}

// replayLines are the replayed configuration's verdicts after iteration
// it, under the recorded ones.
func (h *historyView) replayLines(it, nameW, w int) []string {
	step := h.replay[it]
	if step == nil {
		return nil
	}
	st := h.st
	verdict := st.dim.Render("continue")
	if step.Stop {
		verdict = classStyle(st, step.Class).Render(fmt.Sprintf("STOP (%s) by %s", step.Class, step.TriggeredBy))
	}
	out := []string{cut(st.accent.Render("  replay of "+h.replayName+": ")+verdict, w)}
	for i := range step.Evaluation.Results {
		out = append(out, historyRow(st, &step.Evaluation.Results[i], nil, nameW, w))
	}
	if len(step.Unknown) > 0 {
		out = append(out, st.warn.Render(cut("      unknown (the record cannot say; ralph replay --rerun checks them): "+strings.Join(step.Unknown, ", "), w)))
	}
	if r := h.replayRes; r.Stopped && r.Iteration == it {
		out = append(out, classStyle(st, r.Decision.Class).Render(cut(fmt.Sprintf("  %s would have stopped the run here: %s", h.replayName, r.Decision.Reason), w)))
	}
	return out
}

type histEntry struct {
	seq uint64
	ev  stop.Evaluation
}

type historyMsg struct {
	entries []histEntry
	total   int
	err     error
}

// maxHistory is how many of the latest evaluations the view reads.
const maxHistory = 500

func newHistoryView(st *styles) *historyView {
	return &historyView{fullScreen: fullScreen{"the history view"}, st: st}
}

func (h *historyView) key(m *model, k tea.KeyMsg) (bool, tea.Cmd) { return m.screenKey(h, k) }

func (h *historyView) body(_ *model, width, height int) []string { return h.lines(width, height) }

func (h *historyView) set(msg historyMsg) {
	atEnd := h.offset >= len(h.text)-h.h
	h.entries, h.total, h.err, h.loading, h.text = msg.entries, msg.total, msg.err, false, nil
	h.ver++
	if atEnd {
		h.offset = 1 << 30 // stay with the newest evaluation
	}
}

func (h *historyView) scrollBy(n int) {
	h.offset = min(max(h.offset+n, 0), max(0, len(h.text)-h.h))
}

// openHistory reads the evaluations for the history view.
func (m *model) openHistory() tea.Cmd {
	if m.store == nil {
		return nil
	}
	seqs := m.tree.stops
	total := len(seqs)
	if total > maxHistory {
		seqs = seqs[total-maxHistory:]
	}
	seqs = append([]uint64(nil), seqs...)
	m.history.loading, m.historyStale = true, false
	st := m.store
	return func() tea.Msg {
		msg := historyMsg{total: total}
		for _, seq := range seqs {
			a, err := st.GetSeq(seq)
			if err != nil {
				msg.err = err
				break
			}
			ev, err := stop.EvaluationFromAction(&a)
			if err != nil {
				msg.err = err
				break
			}
			msg.entries = append(msg.entries, histEntry{seq: seq, ev: ev})
		}
		return msg
	}
}

func (h *historyView) Render(width, height int) string {
	return strings.Join(h.lines(width, height), "\n")
}

func (h *historyView) lines(width, height int) []string {
	h.h = max(0, height-2)
	w := width - 3
	h.text = h.cache.get(struct{}{}, w, h.ver, false, func() []string { return h.content(w) })
	h.scrollBy(0)
	rows := make([]string, 0, h.h)
	for _, l := range h.text[h.offset:min(len(h.text), h.offset+h.h)] {
		rows = append(rows, " "+l)
	}
	right := strconv.Itoa(h.total) + " evaluations"
	if h.total > len(h.entries) && len(h.entries) > 0 {
		right = fmt.Sprintf("last %d of %d evaluations", len(h.entries), h.total)
	}
	return h.st.frame("History · stop-condition evaluations", right, true, width, height, rows)
}

func (h *historyView) content(w int) []string {
	st := h.st
	var out []string
	switch {
	case h.err != nil:
		return []string{st.fail.Render("✗ " + h.err.Error())}
	case len(h.entries) == 0 && h.loading:
		return []string{st.dim.Render("reading the evaluations…")}
	case len(h.entries) == 0:
		return []string{st.dim.Render("no evaluation yet: conditions are evaluated after each iteration")}
	}
	nameW := min(max(w/4, 12), 24)
	for i := range h.entries {
		e := &h.entries[i]
		ev := &e.ev
		verdict := st.dim.Render("continue")
		if ev.ShouldStop {
			verdict = st.accent.Render(fmt.Sprintf("STOP (%s) by %s", ev.Class, ev.TriggeredBy))
		}
		if i > 0 {
			out = append(out, "")
		}
		out = append(out, cut(st.bold.Render(fmt.Sprintf("Iteration %d", ev.Iteration))+st.dim.Render(
			fmt.Sprintf(" · seq %d · %s · ", e.seq, fmtDur(ev.Duration)))+verdict, w))
		out = append(out, st.dim.Render(cut("  "+fit("condition", nameW)+" prio class    progress         detail", w)))
		changes := map[string]stop.ProgressChange{}
		for _, p := range ev.Progressed {
			changes[p.Condition] = p
		}
		for _, r := range ev.Results {
			out = append(out, historyRow(st, &r, changes, nameW, w))
			if why := stop.Why(&r); why != "" && why != r.Detail && r.Err == "" { // the error is on the row
				style := st.dim
				if r.Met {
					style = classStyle(st, r.Class)
				}
				out = append(out, style.Render(cut("      "+why, w)))
			}
		}
		out = append(out, h.replayLines(ev.Iteration, nameW, w)...)
		if t := ev.Trigger(); t != nil {
			out = append(out, classStyle(st, t.Class).Render(cut("  "+ansi.Strip(condMark(st, t))+" fired: "+t.Name+" ("+string(t.Class)+") — "+t.Reason, w)))
			const label = "    evidence: "
			for i, l := range wrapWords(clean(t.Evidence), max(10, w-len(label))) {
				if i == 0 {
					out = append(out, st.dim.Render(label)+l)
				} else {
					out = append(out, strings.Repeat(" ", len(label))+l) // the label once
				}
			}
		}
	}
	return out
}

func historyRow(st *styles, r *stop.Result, changes map[string]stop.ProgressChange, nameW, w int) string {
	mark := condMark(st, r)
	prog := fmt.Sprintf("%3d%%", stop.Percent(r.Progress, r.Met))
	if r.Err != "" {
		prog = "  —" // it could not be checked
	}
	if c, ok := changes[r.Name]; ok {
		if c.First {
			prog = fmt.Sprintf("new → %d%%", stop.Percent(c.Current, r.Met))
		} else {
			prog = fmt.Sprintf("%d%% → %d%%", stop.Percent(c.Previous, false), stop.Percent(c.Current, r.Met))
		}
	}
	var flags []string
	flags = append(flags, fmtDur(r.Duration.Round(time.Microsecond)))
	if r.CacheHit {
		flags = append(flags, "cached")
	}
	if r.TimedOut {
		flags = append(flags, st.warn.Render("timed out"))
	}
	if r.Err != "" {
		flags = append(flags, st.fail.Render("error: "+r.Err))
	}
	line := mark + " " + fit(r.Name, nameW) + padLeft(strconv.Itoa(r.Priority), 4) + " " + fit(string(r.Class), 8) +
		" " + fit(prog, 16) + " " + fit(r.Detail, 16) + " " + strings.Join(flags, " · ")
	return " " + cut(line, w-1)
}
