package tui

import (
	"context"
	"log/slog"
	"slices"
	"sync"

	"github.com/ralphloop/ralph/loop"
)

// LogHandler is a slog.Handler for RunnerOptions.Logger that shows the
// run's log records in the UI's log view (l) instead of writing them over
// the screen the UI draws. The run's event bus exists only once NewRunner
// has returned, so records logged before Run attaches the handler are held
// (up to maxPendingLogs) and shown then; once the UI has exited, records go
// to the fallback handler (nil: dropped).
type LogHandler struct {
	root *logRoot
	ops  []logOp // WithAttrs and WithGroup calls, in order
}

type logRoot struct {
	level    slog.Leveler
	fallback slog.Handler
	mu       sync.Mutex
	target   slog.Handler // the bus's handler while the UI runs
	detached bool
	pending  []pendingLog
}

type logOp struct {
	attrs []slog.Attr
	group string
}

type pendingLog struct {
	ops []logOp
	r   slog.Record
}

const maxPendingLogs = 1024

// NewLogHandler returns a handler for records at level and above; fallback
// receives them after the UI has exited.
func NewLogHandler(level slog.Leveler, fallback slog.Handler) *LogHandler {
	if level == nil {
		level = slog.LevelInfo
	}
	return &LogHandler{root: &logRoot{level: level, fallback: fallback}}
}

// Enabled implements slog.Handler.
func (h *LogHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.root.level.Level() }

// Handle implements slog.Handler.
func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	root := h.root
	root.mu.Lock()
	t := root.target
	if t == nil && root.detached {
		t = root.fallback
	}
	if t == nil {
		if !root.detached && len(root.pending) < maxPendingLogs {
			root.pending = append(root.pending, pendingLog{ops: h.ops, r: r.Clone()})
		}
		root.mu.Unlock()
		return nil
	}
	root.mu.Unlock()
	return apply(t, h.ops).Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *LogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &LogHandler{root: h.root, ops: append(slices.Clip(h.ops), logOp{attrs: as})}
}

// WithGroup implements slog.Handler.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &LogHandler{root: h.root, ops: append(slices.Clip(h.ops), logOp{group: name})}
}

func apply(t slog.Handler, ops []logOp) slog.Handler {
	for _, op := range ops {
		if op.group != "" {
			t = t.WithGroup(op.group)
		} else {
			t = t.WithAttrs(op.attrs)
		}
	}
	return t
}

// attach sends records to bus from now on, after the held ones.
func (h *LogHandler) attach(bus *loop.Bus) {
	root := h.root
	t := bus.LogHandler(root.level)
	root.mu.Lock()
	pending := root.pending
	root.pending, root.target = nil, t
	root.mu.Unlock()
	for _, p := range pending {
		_ = apply(t, p.ops).Handle(context.Background(), p.r) // the bus handler never fails
	}
}

// detach sends records to the fallback from now on.
func (h *LogHandler) detach() {
	root := h.root
	root.mu.Lock()
	root.target, root.detached, root.pending = nil, true, nil
	root.mu.Unlock()
}
