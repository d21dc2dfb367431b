package tui

import (
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// frame draws content inside a border of w×h cells with title set into
// the top edge and right (an optional short note) into its right end. The
// focused pane gets a heavy border, so focus shows without colour too.
// content lines are cut or padded to the inner width; missing lines are
// blank. It returns exactly h lines.
func (s *styles) frame(title, right string, focused bool, w, h int, content []string) []string {
	if w < 4 || h < 2 {
		return blank(w, h)
	}
	tl, tr, bl, br, hz, vt := "┌", "┐", "└", "┘", "─", "│"
	bs, ts := s.border, s.title
	if focused {
		tl, tr, bl, br, hz, vt = "┏", "┓", "┗", "┛", "━", "┃"
		bs, ts = s.borderFocus, s.titleFocus
	}
	inner := w - 2
	out := make([]string, 0, h)
	out = append(out, s.memo(edgeKey{title, right, focused, inner, true}, func() string {
		return topEdge(bs, ts, s.dim, tl, tr, hz, title, right, inner)
	}))
	side := s.memo(edgeKey{focused: focused}, func() string { return bs.Render(vt) })
	for i := 0; i < h-2; i++ {
		line := ""
		if i < len(content) {
			line = content[i]
		}
		out = append(out, side+fit(line, inner)+side)
	}
	out = append(out, s.memo(edgeKey{focused: focused, w: inner, top: false, right: "bottom"}, func() string {
		return bs.Render(bl + strings.Repeat(hz, inner) + br)
	}))
	return out
}

// edgeKey names a drawn border piece in the styles' memo.
type edgeKey struct {
	title, right string
	focused      bool
	w            int
	top          bool
}

// memo returns the piece drawn for k, drawing it once: styling a border
// costs colour conversions that would otherwise be paid on every frame.
func (s *styles) memo(k edgeKey, draw func() string) string {
	if v, ok := s.pieces[k]; ok {
		return v
	}
	if len(s.pieces) > 256 {
		clear(s.pieces)
	}
	v := draw()
	s.pieces[k] = v
	return v
}

func topEdge(bs, ts, ns lipgloss.Style, tl, tr, hz, title, right string, inner int) string {
	// ┌ Title ──────── note ┐
	t := ""
	if title != "" {
		t = " " + cut(title, max(0, inner-3)) + " "
	}
	r := ""
	if right != "" {
		if room := inner - 1 - ansi.StringWidth(t) - 3; room > 4 {
			r = " " + cut(right, room) + " "
		}
	}
	fill := inner - 1 - ansi.StringWidth(t) - ansi.StringWidth(r)
	if fill < 0 {
		fill = 0
	}
	var b strings.Builder
	b.WriteString(bs.Render(tl + hz))
	if t != "" {
		b.WriteString(ts.Render(t))
	}
	b.WriteString(bs.Render(strings.Repeat(hz, fill)))
	if r != "" {
		b.WriteString(ns.Render(r))
	}
	b.WriteString(bs.Render(tr))
	return b.String()
}

// blank is h empty lines of w spaces.
func blank(w, h int) []string {
	out := make([]string, h)
	line := strings.Repeat(" ", max(0, w))
	for i := range out {
		out[i] = line
	}
	return out
}

// besides joins two columns of equal height line by line.
func besides(left, right []string) []string {
	out := make([]string, max(len(left), len(right)))
	for i := range out {
		var l, r string
		if i < len(left) {
			l = left[i]
		}
		if i < len(right) {
			r = right[i]
		}
		out[i] = l + r
	}
	return out
}
