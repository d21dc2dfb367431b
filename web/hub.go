package web

import (
	"context"
	"strconv"
	"sync"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/mcpserver"
)

// A hub is one live run's stream shared by every browser following it:
// the run's process serves one stream (its socket serves at most 64)
// whatever the number of pages open, and each browser gets the events
// through its own bounded queue.

// hubs are the live runs followed now, by run id.
type hubs struct {
	mu sync.Mutex
	by map[string]*hub
}

// hub fans one run's events out to its browsers' queues.
type hub struct {
	id     string
	cancel context.CancelFunc

	mu    sync.Mutex
	subs  map[*queue]struct{}
	ended bool
	// What a browser that joins late is told first: the run's state, the
	// plan that waits for an answer, the running call's output so far.
	state, approve *sseEvent
	scroll         []sseEvent
	scrollBytes    int
}

// maxScroll bounds the running call's output a hub keeps for late joiners.
const maxScroll = 64 << 10

// join adds q to the hub of run (starting one, with the run's stream from
// the store's head on, when none runs); q is given what a late joiner is
// told first. leave takes q out again, and ends the hub with its last
// browser.
func (hs *hubs) join(src Source, run *mcpserver.Run, q *queue) (leave func(), err error) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	h := hs.by[run.ID]
	if h == nil || h.isEnded() {
		ctx, cancel := context.WithCancel(context.Background())
		ch, err := src.Events(ctx, run, headOf(run)+1)
		if err != nil {
			cancel()
			return nil, err
		}
		h = &hub{id: run.ID, cancel: cancel, subs: map[*queue]struct{}{}}
		if hs.by == nil {
			hs.by = map[string]*hub{}
		}
		hs.by[run.ID] = h
		go h.pump(ch) // ends when ch closes: the run's process went, or cancel
	}
	h.add(q)
	return func() {
		hs.mu.Lock()
		defer hs.mu.Unlock()
		if h.remove(q) == 0 {
			h.cancel()
			if hs.by[run.ID] == h {
				delete(hs.by, run.ID)
			}
		}
	}, nil
}

func (h *hub) isEnded() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ended
}

func (h *hub) add(q *queue) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range []*sseEvent{h.state, h.approve} {
		if e != nil {
			q.push(*e)
		}
	}
	for _, e := range h.scroll {
		q.push(e)
	}
	h.subs[q] = struct{}{}
}

// remove takes q out and says how many browsers are left.
func (h *hub) remove(q *queue) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, q)
	return len(h.subs)
}

// pump sends each of the run's events to every browser, until the stream
// closes or carries the run's end; then every queue ends.
func (h *hub) pump(ch <-chan loop.Event) {
	for e := range ch {
		if e.Kind == loop.EventAction && e.Action != nil && e.Action.RunID != h.id {
			continue
		}
		se, ok := toSSE(&e)
		if !ok {
			continue
		}
		h.send(&e, se)
		if e.Kind == loop.EventAction && loop.IsRunEnd(e.Action.Type) {
			break
		}
	}
	h.cancel() // the stream may still be open: the run ended
	h.mu.Lock()
	h.ended = true
	subs := make([]*queue, 0, len(h.subs))
	for q := range h.subs {
		subs = append(subs, q)
	}
	h.mu.Unlock()
	for _, q := range subs {
		q.end()
	}
}

// send remembers what a late joiner needs of e and gives se to every
// browser.
func (h *hub) send(e *loop.Event, se sseEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch se.name {
	case "state":
		h.state = &se
	case "approve":
		h.approve = &se
	case "action":
		h.approve = nil // the runner records nothing between a plan and its answer
		if e.Action.Type == ledger.CapabilityCall {
			h.scroll, h.scrollBytes = nil, 0 // a call ended: the next one's output starts afresh
		}
	case "output":
		h.scroll = append(h.scroll, se)
		h.scrollBytes += len(se.data)
		for h.scrollBytes > maxScroll && len(h.scroll) > 1 {
			h.scrollBytes -= len(h.scroll[0].data)
			h.scroll = h.scroll[1:]
		}
	}
	for q := range h.subs {
		q.push(se)
	}
}

// seqOf is an action event's seq (0 for any other).
func seqOf(e sseEvent) uint64 {
	n, _ := strconv.ParseUint(e.id, 10, 64)
	return n
}
