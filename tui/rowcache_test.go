package tui

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/muesli/termenv"

	"github.com/ralphloop/ralph/agent"
)

// TestRowCache checks the rule the panes keep rows by: a finished row is
// drawn once per width whatever its version, an unfinished row again when
// its version changes, and a new width draws every row again.
func TestRowCache(t *testing.T) {
	t.Parallel()
	var c rowCache[int, int, string]
	draws := map[int]int{}
	get := func(key, w, ver int, finished bool) string {
		return c.get(key, w, ver, finished, func() string {
			draws[key]++
			return strconv.Itoa(key) + "@" + strconv.Itoa(w) + "v" + strconv.Itoa(ver)
		})
	}
	type step struct {
		name        string
		key, w, ver int
		finished    bool
		want        string
		wantDraws   int
	}
	for _, s := range []step{
		{"first draw of a finished row", 1, 80, 0, true, "1@80v0", 1},
		{"a finished row is kept", 1, 80, 0, true, "1@80v0", 1},
		{"a finished row is kept at another version", 1, 80, 7, true, "1@80v0", 1},
		{"first draw of an unfinished row", 2, 80, 0, false, "2@80v0", 1},
		{"an unfinished row at its version is kept", 2, 80, 0, false, "2@80v0", 1},
		{"a version bump draws it again", 2, 80, 1, false, "2@80v1", 2},
		{"the row is kept at its new version", 2, 80, 1, false, "2@80v1", 2},
		{"the row drawn last as finished is kept", 2, 80, 1, true, "2@80v1", 2},
		{"a new width draws a finished row again", 1, 100, 7, true, "1@100v7", 2},
		{"a new width draws an unfinished row again", 2, 100, 1, false, "2@100v1", 3},
		{"back to the old width draws again", 1, 80, 7, true, "1@80v7", 3},
	} {
		if got := get(s.key, s.w, s.ver, s.finished); got != s.want || draws[s.key] != s.wantDraws {
			t.Fatalf("%s: got %q after %d draws of row %d, want %q after %d", s.name, got, draws[s.key], s.key, s.want, s.wantDraws)
		}
	}
}

// TestRowCacheDropResetBound checks that a dropped row, and every row after
// reset, is drawn again, and that the cache never holds more than
// maxRowCache rows.
func TestRowCacheDropResetBound(t *testing.T) {
	t.Parallel()
	var c rowCache[int, int, string]
	draws := 0
	get := func(key int) {
		c.get(key, 10, 0, true, func() string { draws++; return "" })
	}
	get(1)
	get(2)
	c.drop(1)
	get(1)
	get(2)
	if draws != 3 {
		t.Fatalf("after drop(1): %d draws, want 3 (row 1 again, row 2 kept)", draws)
	}
	c.reset()
	get(1)
	get(2)
	if draws != 5 {
		t.Fatalf("after reset: %d draws, want 5", draws)
	}
	for k := range 3 * maxRowCache {
		get(k)
		if c.len() > maxRowCache {
			t.Fatalf("the cache holds %d rows, over %d", c.len(), maxRowCache)
		}
	}
}

// TestOutputPaneDrawsFinishedLinesOnce checks the output pane keeps the
// contract: streamed text draws the open line again, and a line once
// followed by another is finished and kept as drawn.
func TestOutputPaneDrawsFinishedLinesOnce(t *testing.T) {
	t.Parallel()
	p := newOutputPane(newStyles(&strings.Builder{}, termenv.Ascii), nil)
	text := func(s string) {
		p.add("call-1", 1, time.Time{}, &agent.Event{Kind: agent.EventText, Text: s})
		_ = p.Render(60, 10)
	}
	text("one\ntwo")
	first, last := p.call.first, p.call.first+len(p.call.lines)-1
	kept, open := p.cache.rows[first], p.cache.rows[last]
	if !kept.finished || open.finished {
		t.Fatalf("finished: first line %v, open line %v; want true, false", kept.finished, open.finished)
	}
	text(" more")
	if got := p.cache.rows[last].row; len(got) != 1 || !strings.Contains(got[0], "two more") {
		t.Fatalf("the open line was not drawn again after it grew: %q", got)
	}
	if again := p.cache.rows[first].row; &again[0] != &kept.row[0] {
		t.Fatal("a finished line was drawn again")
	}
}
