package loop

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// EventKind says what an Event carries.
type EventKind uint8

// Event kinds. Action, Plan and Conditions events are read from the ledger,
// so a consumer never loses one. State and Approve events are few and always
// queued. Wait, Token, Agent and Log events are transient: a consumer that falls
// more than a queue behind loses them and gets a Dropped event instead.
const (
	EventAction     EventKind = iota + 1 // Action was appended to the chain
	EventPlan                            // Plan is ready (read from its PlanGenerated action)
	EventConditions                      // Evaluation: the stop conditions were evaluated
	EventState                           // State: the run's state changed
	EventApprove                         // Plan awaits approval (approve mode)
	EventWait                            // the provider waits until Until (e.g. a 429), Text says why
	EventToken                           // Text: streamed model output
	EventLog                             // Log: a log line
	EventDropped                         // Dropped transient events were lost by this slow consumer
	EventAgent                           // Agent: one event an agent.run call streamed (transient, like Token)
	EventDelay                           // the runner waits until Until before the next iteration ([loop].delay)
)

var eventKindNames = [...]string{"", "action", "plan", "conditions", "state", "approve", "wait", "token", "log", "dropped", "agent", "delay"}

func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && k != 0 {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", k)
}

// Run states beyond those a run ends in.
const (
	StateIdle   = "idle"
	StatePaused = "paused"
)

// PlanInfo is a plan as the UI shows it.
type PlanInfo struct {
	Iteration   int
	Source      string // RTFS
	Provider    string
	Model       string
	Mode        string // "static", "script", "A", "B"
	Repairs     int
	Diagnostics string // one per line
	OK          bool
	Err         string
	ActionSeq   uint64 // the PlanGenerated action
}

// LogLine is one log record.
type LogLine struct {
	Level slog.Level
	Msg   string
	Attrs string // key=value pairs
}

// Event is one item on a run's event stream.
type Event struct {
	Kind       EventKind
	Time       time.Time
	RunID      string
	Iteration  int // the iteration the event belongs to (0 before the first)
	Action     *ledger.Action
	Plan       *PlanInfo
	Evaluation *stop.Evaluation
	State      string // EventState, and the run's state when Dropped
	Text       string // EventWait reason, EventToken text
	Until      time.Time
	Log        LogLine
	Dropped    int
	// EventAgent: what the agent reported, and the CapabilityCall it
	// belongs to (its action id; the call is recorded when it ends).
	Agent  *agent.Event
	CallID string

	afterSeq uint64 // transient events: the chain head when they happened
}

// Bus fans one run's events out to any number of consumers. Publishing
// never blocks the runner: actions reach a consumer from the ledger (a slow
// consumer catches up from the store), and transient events wait in a
// bounded queue per consumer.
type Bus struct {
	store *ledger.Store
	runID string

	mu      sync.Mutex
	subs    map[*subscriber]struct{}
	state   string
	pending *Event // the approval the runner waits for, if any
	delay   *Event // the delay before the next iteration, while it lasts
	// scroll is what the latest agent call streamed (its EventAgent
	// events, the newest within scrollEvents and scrollBytes), which a
	// consumer that subscribes later gets too: an attach shows the output
	// of the call running so far, not only what comes after it.
	scroll      []Event
	scrollBytes int
}

// The bounds of a bus's scrollback of the latest agent call.
const (
	scrollEvents   = 1024
	scrollMaxBytes = 1 << 20
)

// subscriberQueue bounds the transient events a consumer may lag behind,
// and subscriberQueueBytes the text they carry (an agent's output).
const (
	subscriberQueue      = 4096
	subscriberQueueBytes = 4 << 20
)

type subscriber struct {
	mu      sync.Mutex
	queue   []Event
	bytes   int // the text the queued events carry (queuedBytes)
	dropped int
	notify  chan struct{} // capacity 1: "the queue changed"
}

// NewBus returns the bus for runID's events on store.
func NewBus(store *ledger.Store, runID string) *Bus {
	return &Bus{store: store, runID: runID, subs: map[*subscriber]struct{}{}, state: StateIdle}
}

// State is the run's current state.
func (b *Bus) State() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

func (b *Bus) setState(state string, now time.Time) {
	b.mu.Lock()
	changed := b.state != state
	b.state = state
	b.mu.Unlock()
	if changed {
		b.publish(Event{Kind: EventState, State: state, Time: now})
	}
}

// awaitApproval publishes e, an approval request, and remembers it until
// the next call (with a zero Event once the answer came), so a consumer
// that subscribes while the runner waits still gets the request.
func (b *Bus) awaitApproval(e Event) {
	if e.Kind == 0 {
		b.mu.Lock()
		b.pending = nil
		b.mu.Unlock()
		return
	}
	b.publish(e)
	b.mu.Lock()
	b.pending = &e
	b.mu.Unlock()
}

// delaying publishes the wait before the next iteration and remembers it
// until the next call (with a zero Event when the wait is over), so a
// consumer that subscribes during the wait can count it down too.
// The wait is remembered and published under one lock, so a consumer
// that subscribes meanwhile gets it exactly once: from the bus's memory or
// from the publication, never neither.
func (b *Bus) delaying(e Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.delay = nil
	if e.Kind != 0 {
		b.delay = &e
		b.publishLocked(e)
	}
}

// publish queues a transient event for every consumer; it never blocks.
func (b *Bus) publish(e Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.publishLocked(e)
}

// publishLocked is publish with b.mu held.
func (b *Bus) publishLocked(e Event) {
	e.afterSeq = b.store.Head().Seq
	if e.Kind == EventAgent {
		b.keep(e)
	}
	for s := range b.subs {
		s.mu.Lock()
		n := queuedBytes(&e)
		if (len(s.queue) >= subscriberQueue || s.bytes+n > subscriberQueueBytes) && e.Kind != EventState && e.Kind != EventApprove {
			s.dropped++
		} else {
			s.queue = append(s.queue, e)
			s.bytes += n
		}
		s.mu.Unlock()
		select {
		case s.notify <- struct{}{}:
		default:
		}
	}
}

// keep adds e to the scrollback of the latest agent call: a new call's
// first event starts it again, and the oldest events go past its bounds.
func (b *Bus) keep(e Event) {
	if len(b.scroll) > 0 && b.scroll[0].CallID != e.CallID {
		b.scroll, b.scrollBytes = nil, 0
	}
	b.scroll = append(b.scroll, e)
	b.scrollBytes += queuedBytes(&e)
	for len(b.scroll) > scrollEvents || (b.scrollBytes > scrollMaxBytes && len(b.scroll) > 1) {
		b.scrollBytes -= queuedBytes(&b.scroll[0])
		b.scroll = b.scroll[1:]
	}
}

// Subscribe streams the run's events from the chain's fromSeq on (0 or 1:
// the whole chain, so a resumed run shows its history) until ctx ends. A
// consumer that subscribes after the run started first gets its current
// state, and any plan waiting for approval, once the chain up to now has
// been delivered. The channel closes when ctx is done. Consumers must keep
// reading or cancel.
func (b *Bus) Subscribe(ctx context.Context, fromSeq uint64) <-chan Event {
	if fromSeq == 0 {
		fromSeq = 1
	}
	s := &subscriber{notify: make(chan struct{}, 1)}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	// A late consumer learns where the run stands: its state, and the plan
	// waiting for approval, delivered after the chain up to now.
	// The latest agent call's output so far comes at its place among the
	// actions (each event keeps the chain head it happened at).
	for _, e := range b.scroll {
		s.queue = append(s.queue, e)
		s.bytes += queuedBytes(&e)
	}
	if b.state != StateIdle {
		s.queue = append(s.queue, Event{Kind: EventState, State: b.state, Time: time.Now(), afterSeq: b.store.Head().Seq})
	}
	for _, p := range [...]*Event{b.pending, b.delay} {
		if p != nil {
			e := *p
			e.afterSeq = b.store.Head().Seq
			s.queue = append(s.queue, e)
			s.bytes += queuedBytes(&e)
		}
	}
	b.mu.Unlock()
	out := make(chan Event, 64)
	go func() {
		defer close(out)
		defer func() {
			b.mu.Lock()
			delete(b.subs, s)
			b.mu.Unlock()
		}()
		p := pump{bus: b, sub: s, out: out, last: fromSeq - 1}
		p.run(ctx, b.store.Subscribe(ctx, fromSeq))
	}()
	return out
}

// pump merges one consumer's lossless action stream with its transient
// queue, keeping each transient event after the actions that preceded it.
type pump struct {
	bus       *Bus
	sub       *subscriber
	out       chan<- Event
	last      uint64 // last seq read from the chain
	iteration int
}

func (p *pump) run(ctx context.Context, actions <-chan ledger.Action) {
	for {
		if !p.flush(ctx) {
			return
		}
		select {
		case a, ok := <-actions:
			if !ok {
				return
			}
			p.last = a.Seq
			if a.RunID == p.bus.runID && !p.action(ctx, &a) {
				return
			}
		case <-p.sub.notify:
		case <-ctx.Done():
			return
		}
	}
}

// flush delivers the queued transient events the chain has caught up with.
func (p *pump) flush(ctx context.Context) bool {
	for {
		p.sub.mu.Lock()
		if p.sub.dropped > 0 {
			n := p.sub.dropped
			p.sub.dropped = 0
			p.sub.mu.Unlock()
			if !p.send(ctx, Event{Kind: EventDropped, Dropped: n, State: p.bus.State(), Time: time.Now()}) {
				return false
			}
			continue
		}
		if len(p.sub.queue) == 0 || p.sub.queue[0].afterSeq > p.last {
			p.sub.mu.Unlock()
			return true
		}
		e := p.sub.queue[0]
		p.sub.queue[0] = Event{}
		p.sub.queue = p.sub.queue[1:]
		p.sub.bytes -= queuedBytes(&e)
		p.sub.mu.Unlock()
		if !p.send(ctx, e) {
			return false
		}
	}
}

// action delivers a, and the plan or evaluation it carries.
func (p *pump) action(ctx context.Context, a *ledger.Action) bool {
	if a.Type == ledger.IterationStarted {
		p.iteration = int(a.Metadata["iteration"].AsInt())
	}
	if !p.send(ctx, Event{Kind: EventAction, Time: a.Timestamp, Action: a}) {
		return false
	}
	switch a.Type {
	case ledger.PlanGenerated:
		info := PlanInfoFromAction(a)
		info.Iteration = p.iteration
		return p.send(ctx, Event{Kind: EventPlan, Time: a.Timestamp, Plan: &info})
	case ledger.StopConditionsEvaluated:
		if ev, err := stop.EvaluationFromAction(a); err == nil {
			return p.send(ctx, Event{Kind: EventConditions, Time: a.Timestamp, Evaluation: &ev})
		}
	}
	return true
}

// send delivers e stamped with the run id and, when it has none, the
// current iteration.
func (p *pump) send(ctx context.Context, e Event) bool {
	e.RunID = p.bus.runID
	if e.Iteration == 0 {
		e.Iteration = p.iteration
	}
	select {
	case p.out <- e:
		return true
	case <-ctx.Done():
		return false
	}
}

// PlanInfoFromAction reads a PlanGenerated action back.
func PlanInfoFromAction(a *ledger.Action) PlanInfo {
	info := PlanInfo{Provider: a.FunctionName, OK: a.Success, Err: a.ErrorMessage, ActionSeq: a.Seq,
		Mode: a.Metadata["mode"].Str(), Model: a.Metadata["model"].Str(), Repairs: int(a.Metadata["repairs"].AsInt()),
		Diagnostics: a.Metadata["diagnostics"].Str()}
	if len(a.Arguments) > 0 {
		info.Source = a.Arguments[0].Str()
	}
	return info
}

// LogHandler is a slog.Handler that publishes records at level and above
// as EventLog events, so a full-screen UI can show them without writing to
// the terminal it draws on.
func (b *Bus) LogHandler(level slog.Leveler) slog.Handler {
	return &busHandler{bus: b, level: level}
}

type busHandler struct {
	bus    *Bus
	level  slog.Leveler
	prefix string // pre-formatted WithAttrs pairs
	group  string
}

func (h *busHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *busHandler) Handle(_ context.Context, r slog.Record) error {
	var sb strings.Builder
	sb.WriteString(h.prefix)
	r.Attrs(func(a slog.Attr) bool {
		writeAttr(&sb, h.group, a)
		return true
	})
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	h.bus.publish(Event{Kind: EventLog, Time: t, Log: LogLine{Level: r.Level, Msg: r.Message, Attrs: strings.TrimSpace(sb.String())}})
	return nil
}

func (h *busHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var sb strings.Builder
	sb.WriteString(h.prefix)
	for _, a := range as {
		writeAttr(&sb, h.group, a)
	}
	c := *h
	c.prefix = sb.String()
	return &c
}

func (h *busHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group = h.group + name + "."
	return &c
}

func writeAttr(sb *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			writeAttr(sb, group+a.Key+".", g)
		}
		return
	}
	fmt.Fprintf(sb, " %s%s=%s", group, a.Key, a.Value.String())
}

// observer turns a provider's reports into events and LlmConsultation
// actions recorded the moment each exchange completes.
type observer struct {
	r         *Runner
	ctx       context.Context
	st        *runState
	parent    string // the IterationStarted action
	iteration int
	err       error // the first recording failure
}

func (o *observer) Consulted(c arbiter.Consultation) {
	a := &ledger.Action{Type: ledger.LlmConsultation, ParentActionID: o.parent, FunctionName: c.Model,
		Arguments: nil, Success: c.Err == "", ErrorMessage: c.Err, Cost: c.Usage.CostUSD,
		DurationMS: c.Duration.Milliseconds(), Metadata: consultationMeta(c)}
	if _, err := o.r.record(o.ctx, o.st, a); err != nil && o.err == nil {
		o.err = err
	}
}

func (o *observer) Waiting(reason string, until time.Time) {
	o.r.bus.publish(Event{Kind: EventWait, Iteration: o.iteration, Text: reason, Until: until, Time: o.r.o.Now()})
}

func (o *observer) Token(text string) {
	o.r.bus.publish(Event{Kind: EventToken, Iteration: o.iteration, Text: text, Time: o.r.o.Now()})
}

func consultationMeta(c arbiter.Consultation) map[string]rtfs.Value {
	return map[string]rtfs.Value{
		"model": rtfs.String(c.Model), "mode": rtfs.String(c.Mode), "attempt": rtfs.Int(int64(c.Attempt)),
		"prompt_sha256": rtfs.String(c.PromptSHA256), "prompt": rtfs.String(c.Prompt), "response": rtfs.String(c.Response),
		"prompt_tokens": rtfs.Int(c.Usage.PromptTokens), "completion_tokens": rtfs.Int(c.Usage.CompletionTokens),
	}
}

// IsRunEnd reports whether t is one of the actions that close a run.
func IsRunEnd(t ledger.ActionType) bool {
	switch t {
	case ledger.RunCompleted, ledger.RunFailed, ledger.RunStopped, ledger.RunAborted:
		return true
	}
	return false
}

// queuedBytes is the text a queued event holds beyond its own size: what
// subscriberQueueBytes bounds.
func queuedBytes(e *Event) int {
	n := len(e.Text)
	if a := e.Agent; a != nil {
		n += len(a.Text) + len(a.Input)
	}
	return n
}
