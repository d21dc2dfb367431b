package tui

// rowCache is the one rule by which a pane keeps the rows it has drawn, so
// a frame draws again only what changed. A pane names each row by a key
// (a chain row, an output line, or one key for a pane drawn as a whole)
// and asks for it at the pane's width, with the row's version and whether
// it is finished:
//
//   - a finished row (its text will not change again, as an output line
//     once a newer one follows it) is drawn once per width and kept,
//     whatever version it is later asked at;
//   - an unfinished row is drawn again when its version differs from the
//     one it was drawn at;
//   - a new width drops every row, finished or not.
//
// V is whatever the row's text depends on besides the width: a counter
// the pane bumps, or a small struct of the values it reads. R is what a
// drawn row is: a string, or the lines a wrapped row takes. The cache
// holds at most maxRowCache rows and starts over past that, so its memory
// stays flat however long the pane's content. The zero value is empty and
// ready.
type rowCache[K, V comparable, R any] struct {
	w    int
	rows map[K]cachedRow[V, R]
}

type cachedRow[V comparable, R any] struct {
	ver      V
	finished bool
	row      R
}

// maxRowCache bounds a row cache (a few screens' worth of rows).
const maxRowCache = 2048

// get returns row key drawn w cells wide at version ver: the kept row
// when the rule above allows, else draw's, which is kept in its place.
func (c *rowCache[K, V, R]) get(key K, w int, ver V, finished bool, draw func() R) R {
	if c.rows == nil || c.w != w {
		c.reset()
		c.w = w
	}
	if e, ok := c.rows[key]; ok && (e.finished || e.ver == ver) {
		return e.row
	}
	row := draw()
	if len(c.rows) >= maxRowCache {
		clear(c.rows)
	}
	c.rows[key] = cachedRow[V, R]{ver: ver, finished: finished, row: row}
	return row
}

// drop forgets row key (a row that is gone, so its key may name another).
func (c *rowCache[K, V, R]) drop(key K) { delete(c.rows, key) }

// reset forgets every row.
func (c *rowCache[K, V, R]) reset() {
	if c.rows == nil {
		c.rows = make(map[K]cachedRow[V, R], 64)
		return
	}
	clear(c.rows)
}

// len is how many rows are kept.
func (c *rowCache[K, V, R]) len() int { return len(c.rows) }
