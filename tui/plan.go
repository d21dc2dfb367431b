package tui

import (
	"strconv"
	"strings"

	"github.com/charmbracelet/lipgloss"

	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

// planPane shows the current plan in canonical RTFS — the printer's form,
// laid out to the pane's width and coloured by syntax — followed by how it
// was generated: provider, mode, repairs and each diagnostic. While a plan
// awaits approval it shows that plan; while a model streams, its text.
type planPane struct {
	st      *styles
	plan    *loop.PlanInfo
	pending bool   // plan awaits approval (y/n)
	stream  string // the tail of streamed model output for the next plan
	focused bool
	offset  int
	h       int
	ver     int                               // bumped on every change the pane shows
	cache   rowCache[struct{}, int, []string] // the content, kept as one row
	text    []string                          // the content as last drawn
}

// maxStream bounds the streamed text kept for display.
const maxStream = 4096

func newPlanPane(st *styles) *planPane { return &planPane{st: st} }

func (p *planPane) setPlan(info *loop.PlanInfo, pending bool) {
	p.plan, p.pending, p.stream, p.offset = info, pending, "", 0
	p.ver++
}

func (p *planPane) approved() {
	if p.pending {
		p.pending = false
		p.ver++
	}
}

// resetStream forgets streamed text that will not become the plan.
func (p *planPane) resetStream() {
	if p.stream != "" {
		p.stream = ""
		p.ver++
	}
}

func (p *planPane) addStream(text string) {
	p.stream += text
	if len(p.stream) > maxStream {
		p.stream = p.stream[len(p.stream)-maxStream:]
	}
	p.ver++
}

func (p *planPane) scrollBy(d int) {
	p.offset = min(max(p.offset+d, 0), max(0, len(p.text)-p.h))
}

// Render draws the pane in its border.
func (p *planPane) Render(width, height int) string {
	return strings.Join(p.lines(width, height), "\n")
}

func (p *planPane) lines(width, height int) []string {
	p.h = max(0, height-2)
	inner := width - 3
	p.text = p.cache.get(struct{}{}, inner, p.ver, false, func() []string { return p.content(inner) })
	p.scrollBy(0)
	title, right := "Plan", ""
	if pl := p.plan; pl != nil {
		title = "Plan (RTFS · " + planMode(pl.Mode, int64(pl.Repairs)) + ")"
		right = "iteration " + strconv.Itoa(pl.Iteration)
		if p.pending {
			title = "Plan awaiting approval · y/n"
		}
	}
	end := min(len(p.text), p.offset+p.h)
	rows := make([]string, 0, p.h)
	for _, l := range p.text[p.offset:end] {
		rows = append(rows, " "+l)
	}
	return p.st.frame(title, right, p.focused || p.pending, width, height, rows)
}

// content is the pane's text at width w: the plan, then its diagnostics.
func (p *planPane) content(w int) []string {
	st := p.st
	pl := p.plan
	if pl == nil {
		if p.stream != "" {
			return tail(wrap(st.dim.Render("model: ")+p.stream, w), 200)
		}
		return []string{st.dim.Render("no plan yet")}
	}
	var out []string
	src := strings.TrimSpace(pl.Source)
	switch forms, err := rtfs.Read(src, "plan"); {
	case src == "":
		out = append(out, st.dim.Render("(no plan source)"))
	case err != nil: // shown as the model wrote it, with the reader's complaint
		out = append(out, wrap(src, w)...)
		out = append(out, st.fail.Render(cut("✗ "+err.Error(), w)))
	default:
		for _, f := range forms {
			for _, l := range layoutForm(f, w) {
				out = append(out, highlight(st, l))
			}
		}
	}
	var diag []string
	if pl.Provider != "" {
		d := "provider " + pl.Provider
		if pl.Model != "" {
			d += " · model " + pl.Model
		}
		diag = append(diag, d)
	}
	if pl.Err != "" {
		out = append(out, "", st.fail.Render("✗ plan generation failed"))
		out = append(out, wrapStyled(st.fail, pl.Err, w)...)
	}
	out = append(out, "")
	for _, d := range diag {
		out = append(out, st.dim.Render(cut(d, w)))
	}
	for _, d := range strings.Split(pl.Diagnostics, "\n") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, wrapStyled(st.warn, "! "+d, w)...)
		}
	}
	return out
}

func wrapStyled(s lipgloss.Style, text string, w int) []string {
	var out []string
	for _, l := range wrap(text, w) {
		out = append(out, s.Render(l))
	}
	return out
}

func tail(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}
