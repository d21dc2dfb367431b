package tui

// pane is the contract every pane of the main view keeps (chain.go,
// conditions.go, plan.go, output.go — one file each): SetSize takes the
// pane's outer size, border included, so paging and scrolling know it
// before a frame is drawn; Render draws exactly width×height cells, its
// border included, and only the rows in view, each kept in a rowCache
// (rowcache.go) under its key with a version that changes with its text.
// Full-screen views (history, detail, diff, log, help) are modes
// (modes.go) and draw the whole body. tui/README.md says how to add a
// pane, a view, a message or a key.
type pane interface {
	SetSize(width, height int)
	Render(width, height int) string
}

var (
	_ pane = (*chainPane)(nil)
	_ pane = (*condPane)(nil)
	_ pane = (*planPane)(nil)
	_ pane = (*outputPane)(nil)
)

// SetSize sets the pane's outer size, border included.
func (p *condPane) SetSize(_, h int) { p.h = max(0, h-2) }

// SetSize sets the pane's outer size, border included.
func (p *planPane) SetSize(_, h int) { p.h = max(0, h-2) }
