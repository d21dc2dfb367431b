package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/mcpserver"
)

// sseEvent is one Server-Sent Event: its name, its id (an action's seq;
// "" for the others) and its JSON data.
type sseEvent struct {
	name, id string
	data     []byte
}

// maxEventText bounds the text one output event carries.
const maxEventText = 4 << 10

// writeTimeout bounds one write to a browser: one that stops reading ends
// its own stream.
const writeTimeout = 10 * time.Second

// events is /runs/{id}/events: the run's events as text/event-stream. A
// live run's come from its process (the socket's stream, as the TUI
// follows it) from the seq after Last-Event-ID (or ?from=, or now); an
// ended run's stream replays its actions and closes.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	run, err := s.o.Source.Run(r.Context(), r.PathValue("id"))
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	defer run.Close()
	from, fromGiven, err := fromOf(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	if !run.Live {
		s.replayEvents(w, rc, run.ID, run.Record.State, run.ByRun, from)
		return
	}
	if !fromGiven {
		from = headOf(run) + 1
	}
	q := newQueue(s.o.SSEBuffer)
	leave, err := s.hubs.join(s.o.Source, run, q)
	if err != nil {
		s.notLive(w, rc, r, run.ID, from, err)
		return
	}
	defer leave()
	// What was recorded from the seq asked for comes first; the hub's
	// events then go on after it.
	skip, ok := s.writeRecorded(w, rc, run, from)
	if ok {
		s.stream(w, rc, r, q, skip)
	}
}

// writeRecorded sends hello, then run's recorded actions from seq from on,
// and says the last seq sent (from-1 when none was).
func (s *Server) writeRecorded(w http.ResponseWriter, rc *http.ResponseController, run *mcpserver.Run, from uint64) (last uint64, ok bool) {
	var acts []ledger.Action
	var err error
	if tr, isTail := run.Reader.(tailReader); isTail {
		acts, _, _, err = readFrom(tr, run.ID, from)
	} else if acts, err = run.ByRun(run.ID); err == nil {
		for len(acts) > 0 && acts[0].Seq < from {
			acts = acts[1:]
		}
	}
	if err != nil {
		writeSSE(w, rc, sseEvent{name: "unavailable", data: jsonOf(map[string]string{"why": err.Error()})})
		return 0, false
	}
	var b bytes.Buffer
	appendSSE(&b, sseEvent{name: "hello", data: jsonOf(map[string]string{"live": "true"})})
	if from > 0 {
		last = from - 1
	}
	for i := range acts {
		appendSSE(&b, actionEvent(&acts[i]))
		last = acts[i].Seq
		if b.Len() > 64<<10 && !flushSSE(w, rc, &b) {
			return last, false
		}
	}
	return last, flushSSE(w, rc, &b)
}

// notLive answers a stream the run's process did not give: a run that
// ended meanwhile replays what it recorded; one still running (its process
// serves no more streams, or cannot be reached) gets one unavailable
// event saying why, and the page stops following it.
func (s *Server) notLive(w http.ResponseWriter, rc *http.ResponseController, r *http.Request, id string, from uint64, cause error) {
	run, err := s.o.Source.Run(r.Context(), id)
	if err == nil {
		defer run.Close()
		if !run.Live {
			s.replayEvents(w, rc, run.ID, run.Record.State, run.ByRun, from)
			return
		}
	}
	writeSSE(w, rc, sseEvent{name: "unavailable", data: jsonOf(map[string]string{"why": cause.Error()})})
}

// fromOf is the seq a stream starts at: after Last-Event-ID, else ?from=.
func fromOf(r *http.Request) (uint64, bool, error) {
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("Last-Event-ID %q is not an action's seq", id)
		}
		return n + 1, true, nil
	}
	if f := r.URL.Query().Get("from"); f != "" {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("from=%q is not a seq; give the seq to start at", f)
		}
		return n, true, nil
	}
	return 0, false, nil
}

// headOf is the store's head seq as run's reader knows it, else the run's
// last seq (0 when it recorded nothing, or on error: the stream then
// starts at its beginning).
func headOf(run *mcpserver.Run) uint64 {
	if h, ok := run.Reader.(interface{ Head() ledger.Head }); ok {
		return h.Head().Seq
	}
	acts, err := run.ByRun(run.ID)
	if err != nil || len(acts) == 0 {
		return 0
	}
	return acts[len(acts)-1].Seq
}

// replayEvents sends the recorded actions from seq from, then end.
func (s *Server) replayEvents(w http.ResponseWriter, rc *http.ResponseController, id, state string, byRun func(string) ([]ledger.Action, error), from uint64) {
	acts, err := byRun(id)
	if err != nil {
		writeSSE(w, rc, sseEvent{name: "error", data: jsonOf(map[string]string{"error": err.Error()})})
		return
	}
	var b bytes.Buffer
	for i := range acts {
		if acts[i].Seq < from {
			continue
		}
		e := actionEvent(&acts[i])
		appendSSE(&b, e)
		if b.Len() > 64<<10 {
			if !flushSSE(w, rc, &b) {
				return
			}
		}
	}
	appendSSE(&b, sseEvent{name: "end", data: jsonOf(map[string]string{"state": state, "why": "the run has ended: this is what it recorded"})})
	flushSSE(w, rc, &b)
}

// stream writes q's events until it ends or the browser goes, leaving
// out the actions up to seq skip (sent already).
func (s *Server) stream(w http.ResponseWriter, rc *http.ResponseController, r *http.Request, q *queue, skip uint64) {
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	var b bytes.Buffer
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			b.WriteString(": ping\n\n")
		case <-q.ready:
		}
		evs, ended := q.take()
		for _, e := range evs {
			if e.name == "action" && seqOf(e) <= skip {
				continue
			}
			appendSSE(&b, e)
		}
		if ended {
			appendSSE(&b, sseEvent{name: "end", data: jsonOf(map[string]string{"why": "the run's process has ended"})})
		}
		if !flushSSE(w, rc, &b) || ended {
			return
		}
	}
}

func appendSSE(b *bytes.Buffer, e sseEvent) {
	if e.id != "" {
		b.WriteString("id: " + e.id + "\n")
	}
	b.WriteString("event: " + e.name + "\n")
	for _, line := range bytes.Split(e.data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
}

func flushSSE(w http.ResponseWriter, rc *http.ResponseController, b *bytes.Buffer) bool {
	rc.SetWriteDeadline(time.Now().Add(writeTimeout)) // unsupported only by test recorders, which never block
	_, err := w.Write(b.Bytes())
	b.Reset()
	return err == nil && rc.Flush() == nil
}

func writeSSE(w http.ResponseWriter, rc *http.ResponseController, e sseEvent) bool {
	var b bytes.Buffer
	appendSSE(&b, e)
	return flushSSE(w, rc, &b)
}

func jsonOf(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // the values sent are maps and structs of strings and numbers
		return []byte(`{"error":` + strconv.Quote(err.Error()) + `}`)
	}
	return b
}

// actionData is an action as the page's script adds it to the chain.
type actionData struct {
	Seq    uint64 `json:"seq"`
	Type   string `json:"type"`
	Label  string `json:"label"`
	Detail string `json:"detail,omitempty"`
	Failed bool   `json:"failed,omitempty"`
	End    bool   `json:"end,omitempty"`
	// Iteration is an IterationStarted's iteration.
	Iteration int `json:"iteration,omitempty"`
}

func actionEvent(a *ledger.Action) sseEvent {
	n := actionNode(a)
	d := actionData{Seq: a.Seq, Type: n.Type, Label: n.Label, Detail: n.Detail, Failed: n.Failed, End: loop.IsRunEnd(a.Type)}
	if a.Type == ledger.IterationStarted {
		d.Iteration = int(a.Metadata["iteration"].AsInt())
	}
	return sseEvent{name: "action", id: strconv.FormatUint(a.Seq, 10), data: jsonOf(d)}
}

// toSSE is a loop event as the page gets it; ok is false for one it does
// not show.
func toSSE(e *loop.Event) (sseEvent, bool) {
	switch e.Kind {
	case loop.EventAction:
		return actionEvent(e.Action), true
	case loop.EventConditions:
		conds, _ := conditionsOf(e.Evaluation)
		return sseEvent{name: "conditions", data: jsonOf(conds)}, true
	case loop.EventState:
		return sseEvent{name: "state", data: jsonOf(map[string]string{"state": e.State})}, true
	case loop.EventAgent:
		if e.Agent == nil || e.Agent.Text == "" {
			return sseEvent{}, false
		}
		return sseEvent{name: "output", data: jsonOf(map[string]string{"call": e.CallID, "text": cut(e.Agent.Text)})}, true
	case loop.EventToken:
		return sseEvent{name: "output", data: jsonOf(map[string]string{"text": cut(e.Text)})}, true
	case loop.EventApprove:
		return sseEvent{name: "approve", data: jsonOf(map[string]int{"iteration": e.Iteration})}, true
	case loop.EventDropped:
		return sseEvent{name: "snapshot", data: jsonOf(map[string]string{"why": "the run's process dropped events for this page"})}, true
	}
	return sseEvent{}, false
}

func cut(s string) string {
	if len(s) > maxEventText {
		return strings.ToValidUTF8(s[:maxEventText], "") + " …"
	}
	return s
}

// maxQueueBytes bounds the data one browser's queue holds.
const maxQueueBytes = 256 << 10

// queue holds what one browser has not been sent yet, at most max events
// and maxQueueBytes of data: a browser that falls further behind is sent
// one snapshot event instead (its page then reloads what it shows), never
// an unbounded queue.
type queue struct {
	mu      sync.Mutex
	max     int
	bytes   int
	evs     []sseEvent
	behind  bool
	lastSeq uint64 // the last action seq seen while behind
	ended   bool
	ready   chan struct{} // signalled (never blocking) when there is something to take
}

func newQueue(max int) *queue { return &queue{max: max, ready: make(chan struct{}, 1)} }

// end marks the queue's stream as ended.
func (q *queue) end() {
	q.mu.Lock()
	q.ended = true
	q.mu.Unlock()
	q.signal()
}

func (q *queue) push(e sseEvent) {
	q.mu.Lock()
	switch {
	case q.behind:
	case len(q.evs) >= q.max || q.bytes+len(e.data) > maxQueueBytes:
		q.behind, q.evs, q.bytes = true, nil, 0
	default:
		q.evs = append(q.evs, e)
		q.bytes += len(e.data)
	}
	if q.behind && e.id != "" {
		q.lastSeq, _ = strconv.ParseUint(e.id, 10, 64)
	}
	q.mu.Unlock()
	q.signal()
}

func (q *queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take empties the queue: its events, or one snapshot when it fell
// behind (its id the last seq dropped, so a reconnect resumes after it).
func (q *queue) take() ([]sseEvent, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.evs
	q.evs, q.bytes = nil, 0
	if q.behind {
		q.behind = false
		snap := sseEvent{name: "snapshot", data: jsonOf(map[string]string{"why": "this page fell behind the run; it reloads what it shows"})}
		if q.lastSeq > 0 {
			snap.id = strconv.FormatUint(q.lastSeq, 10)
		}
		evs = []sseEvent{snap}
	}
	return evs, q.ended
}
