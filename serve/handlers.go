package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/user"
	"slices"
	"strconv"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

func (s *Server) runs(w http.ResponseWriter, r *http.Request) {
	runs, err := loop.ListRuns(s.o.Store)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	in := s.info()
	writeJSON(w, RunRows(runs, &in, time.Now())) // [] for none: RunRows makes a non-nil slice
}

func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	runs, err := loop.ListRuns(s.o.Store)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	in := s.info()
	for _, row := range RunRows(runs, &in, time.Now()) {
		if row.ID == id {
			writeJSON(w, row)
			return
		}
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("no run %s in this store; GET /v1/runs lists them", id))
}

// actions streams the actions a filter selects as NDJSON (the ledger's
// JSON form, one per line), in seq order: ?run=, ?plan= or ?intent=, and
// ?from= and ?to= (inclusive) for a seq range.
func (s *Server) actions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := ledger.Filter{RunID: q.Get("run"), PlanID: q.Get("plan"), IntentID: q.Get("intent")}
	var err error
	if f.FromSeq, err = uintParam(r, "from", 0); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	to, err := uintParam(r, "to", 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if to > 0 && to < f.FromSeq {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("to (%d) is before from (%d)", to, f.FromSeq))
		return
	}
	release, ok := s.openStream(w)
	if !ok {
		return
	}
	defer release()
	bw, _ := s.ndjson(w)
	var buf []byte
	errStop := errors.New("past to")
	err = s.o.Store.Select(f, func(a ledger.Action) error {
		if to > 0 && a.Seq > to {
			return errStop
		}
		buf = append(ledger.AppendJSON(buf[:0], &a), '\n')
		_, err := bw.Write(buf)
		if err == nil {
			err = r.Context().Err()
		}
		return err
	})
	if err != nil && !errors.Is(err, errStop) {
		// The status is sent: end the stream with an error line the
		// client reports (an action line never has an "error" key alone).
		b, _ := json.Marshal(errorBody{Error: err.Error()})
		bw.Write(append(b, '\n'))
	}
	bw.Flush()
}

func (s *Server) action(w http.ResponseWriter, r *http.Request) {
	seq, ok := pathSeq(w, r)
	if !ok {
		return
	}
	a, err := s.o.Store.GetSeq(seq)
	s.writeAction(w, a, err, fmt.Sprintf("no action at seq %d", seq))
}

func (s *Server) actionByID(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		writeError(w, http.StatusBadRequest, "GET /v1/action needs ?id=ACTION_ID")
		return
	}
	a, err := s.o.Store.Get(id)
	s.writeAction(w, a, err, fmt.Sprintf("no action %s", id))
}

func (s *Server) writeAction(w http.ResponseWriter, a ledger.Action, err error, notFound string) {
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		writeError(w, http.StatusNotFound, notFound)
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(ledger.AppendJSON(nil, &a), '\n'))
	}
}

// historyEntry is one line of GET /v1/runs/{id}/history.
type historyEntry struct {
	Seq        uint64          `json:"seq"`
	Evaluation stop.Evaluation `json:"evaluation"`
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	acts, err := s.o.Store.ByRun(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if len(acts) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("run %s has no recorded actions; GET /v1/runs lists the runs", r.PathValue("id")))
		return
	}
	bw, _ := s.ndjson(w)
	enc := json.NewEncoder(bw)
	for i := range acts {
		if acts[i].Type != ledger.StopConditionsEvaluated {
			continue
		}
		ev, err := stop.EvaluationFromAction(&acts[i])
		if err != nil {
			enc.Encode(errorBody{Error: fmt.Sprintf("seq %d: %v", acts[i].Seq, err)})
			break
		}
		if enc.Encode(historyEntry{Seq: acts[i].Seq, Evaluation: ev}) != nil {
			return
		}
	}
	bw.Flush()
}

// predicate evaluates ?expr= (RTFS or the JSON DSL) against the run's
// actions, as `ralph predicate` does.
func (s *Server) predicate(w http.ResponseWriter, r *http.Request) {
	src := r.URL.Query().Get("expr")
	if src == "" {
		writeError(w, http.StatusBadRequest, "GET /v1/runs/{id}/predicate needs ?expr=PREDICATE")
		return
	}
	pred, err := stop.ParsePredicate(src, "<predicate>")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	acts, err := s.o.Store.ByRun(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if len(acts) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("run %s has no recorded actions; GET /v1/runs lists the runs", r.PathValue("id")))
		return
	}
	rep, err := EvalPredicate(r.Context(), pred, acts)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	writeJSON(w, rep)
}

// verify verifies the whole chain from one snapshot: up to the head as it
// was when the verification began, while the run goes on appending. POST
// takes a pinned key and saved checkpoints (verifyRequest).
func (s *Server) verify(w http.ResponseWriter, r *http.Request) {
	var req verifyRequest
	if r.Method == http.MethodPost {
		d := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<20))
		d.DisallowUnknownFields()
		if err := d.Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf(`the body must be one JSON object such as {"key": "VKEY"}: %v`, err))
			return
		}
	}
	rep, err := s.o.Store.VerifyWith(r.Context(), ledger.VerifyOptions{Key: req.Key, Since: req.Since})
	out := wireReport{Actions: rep.Actions, Checkpoints: rep.Checkpoints, IndexEntries: rep.IndexEntries,
		HeadSeq: rep.Head.Seq, HeadChain: rep.Head.ChainHash, TrustedKey: rep.TrustedKey, Pinned: rep.Pinned, Root: rep.Root,
		Consistent: rep.Consistent, Problems: []wireProblem{}}
	for _, p := range rep.Problems {
		out.Problems = append(out.Problems, wireProblem{Seq: p.Seq, Reason: p.Reason})
	}
	var ie *ledger.IntegrityError
	if err != nil && !errors.As(err, &ie) {
		out.Err = err.Error()
	}
	writeJSON(w, out)
}

// checkpoint is the latest signed tree checkpoint.
func (s *Server) checkpoint(w http.ResponseWriter, r *http.Request) {
	cp, err := s.o.Store.LatestCheckpoint()
	if errors.Is(err, ledger.ErrNoTreeCheckpoint) {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, cp)
}

// prove is the inclusion proof of the action at seq in the latest checkpoint.
func (s *Server) prove(w http.ResponseWriter, r *http.Request) {
	seq, ok := pathSeq(w, r)
	if !ok {
		return
	}
	p, err := s.o.Store.ProveInclusion(r.Context(), seq)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ledger.ErrNoTreeCheckpoint):
		writeError(w, http.StatusConflict, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		writeJSON(w, p)
	}
}

func (s *Server) verifyAction(w http.ResponseWriter, r *http.Request) {
	seq, ok := pathSeq(w, r)
	if !ok {
		return
	}
	p, err := s.o.Store.VerifyAction(r.Context(), seq)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no action at seq %d", seq))
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		writeJSON(w, p)
	}
}

// events streams the run's events from ?from= (a chain seq; 0 the whole
// chain) as NDJSON until the client goes or the server closes. ?ui=1 counts
// the client as an attached UI in Info.UIs.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	if s.o.Runner == nil && s.o.Batch == "" {
		writeError(w, http.StatusConflict, "this process holds the store but drives no run; there are no live events")
		return
	}
	from, err := uintParam(r, "from", 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	release, ok := s.openStream(w)
	if !ok {
		return
	}
	defer release()
	if r.URL.Query().Get("ui") == "1" {
		s.attached.Add(1)
		defer s.attached.Add(-1)
	}
	st := &stream{}
	if head := s.o.Store.Head().Seq; from > head {
		st.last.Store(head) // nothing of now to catch up on
	}
	s.mu.Lock()
	s.streams[st] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.streams, st)
		s.mu.Unlock()
	}()
	var events <-chan loop.Event
	if s.o.Runner != nil {
		events = s.o.Runner.Events().Subscribe(r.Context(), from)
	} else { // a batch: every action its runs record, as they are appended
		events = actionEvents(r.Context(), s.o.Store.Subscribe(r.Context(), from))
	}
	bw, dw := s.ndjson(w)
	if dw.Flush() != nil { // the status line now: the client waits for it
		return
	}
	enc := json.NewEncoder(bw)
	var last uint64
	for e := range events {
		for ok := true; ok; { // what is ready goes in one write
			if err := enc.Encode(toWire(&e)); err != nil {
				return
			}
			if e.Kind == loop.EventAction {
				last = e.Action.Seq
			}
			select {
			case e, ok = <-events:
			default:
				ok = false
			}
		}
		if bw.Flush() != nil || dw.Flush() != nil {
			return
		}
		if last > st.last.Load() {
			st.last.Store(last)
		}
	}
}

func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	var c control
	d := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf(`the body must be one JSON object such as {"do": "pause"}: %v`, err))
		return
	}
	run := s.o.Runner
	if run == nil {
		writeError(w, http.StatusConflict, "this process holds the store but drives no run; there is nothing to control")
		return
	}
	if err := s.recordControl(r.Context(), c.Do); err != nil {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	switch c.Do {
	case "pause":
		run.Pause()
	case "resume":
		run.Resume()
	case "skip":
		run.SkipIteration()
	case "abort":
		run.Abort()
	case "approve", "decline":
		if s.o.Approve == nil {
			writeError(w, http.StatusConflict, "this run does not take plan approvals from the socket (start it with --approve in the UI)")
			return
		}
		if c.Iteration <= 0 {
			writeError(w, http.StatusBadRequest, `approve and decline need "iteration", the iteration whose plan is answered`)
			return
		}
		if err := s.o.Approve(c.Iteration, c.Do == "approve"); err != nil {
			writeError(w, http.StatusConflict, err.Error())
			return
		}
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf(`"do" must be pause, resume, skip, abort, approve or decline, not %q`, c.Do))
		return
	}
	writeJSON(w, s.info())
}

// recordControl records on the run's chain that its owner asked for do
// through the socket, before it is done, as a fleet's controls are: the
// chain says who paused, resumed, skipped or aborted the run. A control
// before the run's start (nothing to record on yet) is done unrecorded;
// one after its end is refused. A control from this process itself is a
// fleet member's that its tunnel recorded already, with the member.
func (s *Server) recordControl(ctx context.Context, do string) error {
	rec, ok := s.o.Runner.(interface {
		RecordRequest(ctx context.Context, op, via string, by loop.Requester) error
	})
	if !ok || !slices.Contains([]string{"pause", "resume", "skip", "abort"}, do) || peerPID(ctx) == os.Getpid() {
		return nil
	}
	err := rec.RecordRequest(ctx, do, "socket", loop.Requester{Name: ownerName(), Role: "owner"})
	if errors.Is(err, loop.ErrNotStarted) {
		return nil
	}
	return err
}

// ownerName is the name of the user this process runs as (its uid when
// it has none): the only user the socket answers.
func ownerName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}

// Trailers of GET /v1/bundle: the number of actions the bundle holds, or
// the error that ended it after it began.
const (
	trailerBundleActions = "Ralph-Bundle-Actions"
	trailerError         = "Ralph-Error"
)

// bundle streams the whole store as a bundle (docs/ledger.md "Bundles"),
// written by the ledger from one snapshot as it reads it. Every commit
// ends at a signed checkpoint, so the bundle ends at one too and
// verifies, while appends go on. The status is sent with the first byte:
// an error before it is a 500, one after it the Ralph-Error trailer.
func (s *Server) bundle(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.Query()) > 0 {
		writeError(w, http.StatusBadRequest, "GET /v1/bundle takes no parameters: a bundle holds the whole store")
		return
	}
	release, ok := s.openStream(w)
	if !ok {
		return
	}
	defer release()
	w.Header().Set("Trailer", trailerBundleActions+", "+trailerError)
	lw := &lazyWriter{w: w, dw: newDeadlineWriter(w, s.o.WriteTimeout), ctx: r.Context()}
	n, err := s.o.Store.ExportBundle(lw)
	if err != nil && !lw.started {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if err != nil {
		w.Header().Set(trailerError, err.Error())
		return
	}
	w.Header().Set(trailerBundleActions, strconv.Itoa(n))
}

// lazyWriter sends the status and headers with the first write, so an
// error before any byte is still an error status; it stops writing once
// the client has gone.
type lazyWriter struct {
	w       http.ResponseWriter
	dw      *deadlineWriter
	ctx     context.Context
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if err := l.ctx.Err(); err != nil {
		return 0, err
	}
	if !l.started {
		l.started = true
		l.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		l.w.WriteHeader(http.StatusOK)
	}
	return l.dw.Write(p)
}

// pathSeq parses the {seq} path value, answering 400 when it is not a
// whole number.
func pathSeq(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("an action is named by its seq, a whole number, not %q", r.PathValue("seq")))
		return 0, false
	}
	return seq, true
}

// actionEvents is the store's actions as the event stream carries them
// (EventAction), for a process that drives a batch: its own run and its
// task runs record on the one store, each action as it is appended.
func actionEvents(ctx context.Context, actions <-chan ledger.Action) <-chan loop.Event {
	out := make(chan loop.Event, 64)
	go func() { // ends with actions, which end with ctx
		defer close(out)
		for a := range actions {
			select {
			case out <- loop.Event{Kind: loop.EventAction, Action: &a, Time: a.Timestamp}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
