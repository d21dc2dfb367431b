package tui

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// checkpoints follows the run's checkpoints (DESIGN §19): the commit after
// each iteration and the iteration's row, so the row can carry its
// "+12 −3" summary and D can show its diff. git runs in tea.Cmds, never
// in Update.
type checkpoints struct {
	workdir string         // the run's workdir, from its config snapshot
	commits map[int]string // by iteration; 0 is the state before the run
	rows    map[int]int32  // each iteration's row
	asked   map[int]bool   // iterations whose summary was asked for
	pending []int          // iterations whose summary to ask for next
}

func newCheckpoints() *checkpoints {
	return &checkpoints{commits: map[int]string{}, rows: map[int]int32{}, asked: map[int]bool{}}
}

// observe takes an action before the tree does (an IterationCompleted's
// row is found through its still open IterationStarted).
func (c *checkpoints) observe(a *ledger.Action, t *tree) {
	commit := a.Metadata[loop.MetaCheckpoint].Str()
	switch a.Type {
	case ledger.RunStarted:
		if cfg, err := config.Parse([]byte(a.Metadata["config"].Str()), "snapshot", func(string) string { return "" }); err == nil {
			c.workdir = cfg.Loop.Workdir
		}
		if commit != "" {
			c.commits[0] = commit
		}
	case ledger.IterationCompleted:
		n := int(a.Metadata["iteration"].AsInt())
		idx, ok := t.open[t.key(a.ParentActionID)]
		if commit == "" || !ok {
			return
		}
		c.commits[n], c.rows[n] = commit, idx
		c.pending = append(c.pending, n)
	}
}

// diffStatMsg is an iteration's summary, computed off Update.
type diffStatMsg struct {
	row            int32
	added, deleted int
	err            error
}

// summaries returns a command computing the summaries not yet asked for.
func (c *checkpoints) summaries(ctx context.Context) tea.Cmd {
	var cmds []tea.Cmd
	for _, n := range c.pending {
		from, okFrom := c.commits[n-1]
		to := c.commits[n]
		if !okFrom || c.asked[n] || c.workdir == "" {
			continue
		}
		c.asked[n] = true
		row, workdir := c.rows[n], c.workdir
		cmds = append(cmds, func() tea.Msg {
			msg := diffStatMsg{row: row}
			repo, err := gitx.Open(ctx, workdir)
			if err != nil {
				msg.err = err
				return msg
			}
			files, err := repo.DiffStat(ctx, from, to)
			for _, f := range files {
				msg.added, msg.deleted = msg.added+f.Added, msg.deleted+f.Deleted
			}
			msg.err = err
			return msg
		})
	}
	c.pending = c.pending[:0]
	return tea.Batch(cmds...)
}

// setSummary puts an iteration's summary on its row; one that could not
// be made (the checkpoints were pruned) leaves the row as it is.
func (m *model) setSummary(msg diffStatMsg) {
	if msg.err != nil {
		return
	}
	n := m.tree.at(msg.row)
	note := fmt.Sprintf("+%d −%d", msg.added, msg.deleted)
	if old := m.tree.notes[msg.row]; old != "" { // the summary first: it is short, and a long error is cut
		note += " · " + old
	}
	m.tree.notes[msg.row] = note
	n.ver++
}

// diffView shows one iteration's diff (D on its row), scrollable.
type diffView struct {
	fullScreen
	st        *styles
	iteration int
	lines     []string
	err       error
	loading   bool
	offset    int
	h         int
}

// maxDiffBytes bounds the diff the view reads.
const maxDiffBytes = 4 << 20

type diffMsg struct {
	iteration int
	text      string
	err       error
}

func newDiffView(st *styles) *diffView {
	return &diffView{fullScreen: fullScreen{"the diff view"}, st: st}
}

func (d *diffView) key(m *model, k tea.KeyMsg) (bool, tea.Cmd) { return m.screenKey(d, k) }

func (d *diffView) body(_ *model, width, height int) []string { return d.render(width, height) }

func (d *diffView) scrollBy(n int) {
	d.offset = min(max(d.offset+n, 0), max(0, len(d.lines)-d.h))
}

func (d *diffView) set(msg diffMsg) {
	if msg.iteration != d.iteration {
		return // an older request
	}
	d.loading, d.err, d.offset = false, msg.err, 0
	d.lines = strings.Split(strings.TrimRight(clean(msg.text), "\n"), "\n")
	if msg.text == "" && msg.err == nil {
		d.lines = []string{"the iteration changed no file"}
	}
}

// openDiff shows the diff of the iteration the selected row is in.
func (m *model) openDiff() tea.Cmd {
	idx, ok := m.chain.selected()
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(m.tree.iterationOf(idx))
	if err != nil {
		m.lastLog = "D shows an iteration's diff: select an iteration's row"
		return nil
	}
	c := m.checkpoints
	from, okFrom := c.commits[n-1]
	to, okTo := c.commits[n]
	if !okFrom || !okTo || c.workdir == "" {
		m.lastLog = fmt.Sprintf("iteration %d has no checkpoint (the workdir is not a git work tree, or [loop] checkpoints is off)", n)
		return nil
	}
	d := m.diff
	d.iteration, d.loading, d.err, d.lines, d.offset = n, true, nil, nil, 0
	m.show(m.diff)
	ctx, workdir := m.ctx, c.workdir
	return func() tea.Msg {
		repo, err := gitx.Open(ctx, workdir)
		if err != nil {
			return diffMsg{iteration: n, err: err}
		}
		var b bytes.Buffer
		err = repo.Diff(ctx, &capped{w: &b, n: maxDiffBytes}, from, to, false, false)
		return diffMsg{iteration: n, text: b.String(), err: err}
	}
}

// capped keeps the first n bytes written to it and drops the rest.
type capped struct {
	w *bytes.Buffer
	n int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.n - c.w.Len(); room > 0 {
		c.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (d *diffView) Render(width, height int) string {
	return strings.Join(d.render(width, height), "\n")
}

func (d *diffView) render(width, height int) []string {
	d.h = max(0, height-2)
	d.scrollBy(0)
	st := d.st
	var rows []string
	switch {
	case d.err != nil:
		rows = []string{st.fail.Render(" ✗ " + d.err.Error())}
	case d.loading:
		rows = []string{st.dim.Render(" reading the diff…")}
	default:
		for _, l := range d.lines[d.offset:min(len(d.lines), d.offset+d.h)] {
			l = " " + cut(l, max(1, width-3))
			switch {
			case strings.HasPrefix(l, " +++") || strings.HasPrefix(l, " ---") || strings.HasPrefix(l, " diff ") || strings.HasPrefix(l, " index "):
				l = st.bold.Render(l)
			case strings.HasPrefix(l, " +"):
				l = st.ok.Render(l)
			case strings.HasPrefix(l, " -"):
				l = st.fail.Render(l)
			case strings.HasPrefix(l, " @@"):
				l = st.accent.Render(l)
			}
			rows = append(rows, l)
		}
	}
	right := ""
	if len(d.lines) > d.h {
		right = fmt.Sprintf("%d–%d of %d lines", d.offset+1, min(len(d.lines), d.offset+d.h), len(d.lines))
	}
	return st.frame(fmt.Sprintf("Diff · iteration %d", d.iteration), right, true, width, height, rows)
}
