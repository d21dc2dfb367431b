package web

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/mcpserver"
	"github.com/ralphloop/ralph/serve"
	"github.com/ralphloop/ralph/stop"
)

// runView is a run's page.
type runView struct {
	ID, State, Goal, Started, Duration string
	Iterations                         int
	Cost                               string
	Tokens                             int64
	Live                               bool
	Ended                              bool
	// Why the run stopped (when it did): class, condition, reason, evidence.
	Class, Condition, Reason, Evidence string
	// EvaluatedAfter is the iteration the conditions were evaluated after.
	EvaluatedAfter int
	Conditions     []conditionView
	Budgets        []conditionView
	Chain          []*node
	Output         outputView
	Verify         *verifyView
	WhatIf         whatIfView
	CSRF           string
	// Controls are the buttons a live run shows; Approves says it takes
	// plan approvals, Approve the iteration whose plan waits for an answer
	// (0: none known yet; the live stream names it).
	Controls []string
	Approves bool
	Approve  int
	Head     uint64 // the last seq on the page: the live stream goes on from it
	Notice   string // what a control just did
}

// conditionView is one stop condition's latest verdict.
type conditionView struct {
	Name, Kind, Class, Verdict, Why, Detail string
	Met                                     bool
	Percent                                 int
}

// outputView is the agent's last recorded output.
type outputView struct {
	Call string // its action id
	Text string
	Note string // why there is none, or that it is cut
}

// maxOutput bounds the agent output shown (its tail).
const maxOutput = 64 << 10

// runPage is /runs/{id}: a unique prefix or latest redirects to the run's
// id.
func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	run, ok := s.resolveRun(w, r)
	if !ok {
		return
	}
	defer run.Close()
	acts, folded, err := runActions(run, s.window)
	if focus, _ := strconv.Atoi(r.URL.Query().Get("iteration")); err == nil && focus > 0 && focus <= folded {
		folded = 0 // an older iteration asked for: the whole run
		acts, err = run.ByRun(run.ID)
	}
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	v := s.runView(r, run, acts)
	if folded > 0 {
		v.Chain = withFolded(v.Chain, run.ID, folded)
	}
	v.Notice = r.URL.Query().Get("done")
	s.render(w, r, http.StatusOK, "run", v)
}

// openRun opens the run the path names, redirecting a prefix or latest to
// its id, and reads its actions; ok is false when it answered.
func (s *Server) openRun(w http.ResponseWriter, r *http.Request) (*mcpserver.Run, []ledger.Action, bool) {
	run, ok := s.resolveRun(w, r)
	if !ok {
		return nil, nil, false
	}
	acts, err := run.ByRun(run.ID)
	if err != nil {
		run.Close()
		s.failErr(w, r, err)
		return nil, nil, false
	}
	return run, acts, true
}

// resolveRun opens the run the path names, redirecting a GET for a prefix
// or latest to its id; ok is false when it answered.
func (s *Server) resolveRun(w http.ResponseWriter, r *http.Request) (*mcpserver.Run, bool) {
	id := r.PathValue("id")
	run, err := s.o.Source.Run(r.Context(), id)
	if err != nil {
		s.failErr(w, r, err)
		return nil, false
	}
	if run.ID != id && r.Method == http.MethodGet {
		run.Close()
		u := url.URL{Path: strings.Replace(r.URL.Path, "/runs/"+id, "/runs/"+run.ID, 1), RawQuery: r.URL.RawQuery}
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
		return nil, false
	}
	return run, true
}

// runView reads everything the run page shows of run.
func (s *Server) runView(r *http.Request, run *mcpserver.Run, acts []ledger.Action) runView {
	rec := run.Record
	if run.State != "" {
		rec.State = run.State
	}
	row := rowOf(rec, 0, s.o.Now())
	v := runView{ID: run.ID, State: rec.State, Goal: rec.Goal, Started: row.Started, Iterations: rec.Iterations,
		Cost: row.Cost, Tokens: rec.Tokens, Live: run.Live, CSRF: csrfOf(r)}
	if len(acts) > 0 {
		v.Head = acts[len(acts)-1].Seq
	}
	for i := len(acts) - 1; i >= 0; i-- {
		if a := &acts[i]; loop.IsRunEnd(a.Type) {
			v.Ended = true
			v.Class, v.Condition = a.Metadata["class"].Str(), a.Metadata["condition"].Str()
			v.Reason, v.Evidence = a.Metadata["reason"].Str(), a.Metadata["evidence"].Str()
			break
		}
	}
	if ev := lastEvaluation(acts); ev != nil {
		v.EvaluatedAfter = ev.Iteration
		v.Conditions, v.Budgets = conditionsOf(ev)
	}
	focus, _ := strconv.Atoi(r.URL.Query().Get("iteration"))
	v.Chain = chainOf(acts, focus)
	v.Output = s.outputOf(run, acts)
	v.Verify = s.verified.get(run)
	v.WhatIf = whatIfView{Config: stopTables(acts), CSRF: v.CSRF}
	if run.Live && s.o.Source.Steerable(run) {
		v.Controls = []string{"pause", "resume", "skip", "abort"}
		if v.Approves = s.o.Source.Approves(run); v.Approves {
			v.Approve = awaitingApproval(acts)
		}
	}
	return v
}

// lastEvaluation is the last stop evaluation in acts.
func lastEvaluation(acts []ledger.Action) *stop.Evaluation {
	for i := len(acts) - 1; i >= 0; i-- {
		if acts[i].Type != ledger.StopConditionsEvaluated {
			continue
		}
		if ev, err := stop.EvaluationFromAction(&acts[i]); err == nil {
			return &ev
		}
	}
	return nil
}

// conditionsOf is each condition's verdict, and the limit-class ones again
// as budgets (their progress as a bar).
func conditionsOf(ev *stop.Evaluation) (conds, budgets []conditionView) {
	for _, res := range ev.Results {
		c := conditionView{Name: res.Name, Kind: res.Kind, Class: string(res.Class), Met: res.Met, Detail: res.Detail,
			Percent: int(min(max(res.Progress, 0), 1) * 100)}
		switch {
		case res.Err != "":
			c.Verdict = "error"
		case res.Met:
			c.Verdict = "met"
		default:
			c.Verdict = "not met"
		}
		c.Why = whyLine(res)
		conds = append(conds, c)
		if res.Class == stop.ClassLimit {
			budgets = append(budgets, c)
		}
	}
	return conds, budgets
}

// whyLine is a verdict's reason, its error, and what was looked at.
func whyLine(res stop.Result) string {
	parts := []string{}
	for _, p := range []string{res.Reason, res.Err, res.Evidence} {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	if res.TimedOut {
		parts = append(parts, "timed out")
	}
	return strings.Join(parts, " — ")
}

// awaitingApproval is the iteration whose plan waits for an answer, of a
// run that takes approvals: its last action is the plan (the runner
// records nothing between a plan and its answer). 0: none.
func awaitingApproval(acts []ledger.Action) int {
	if len(acts) > 0 && acts[len(acts)-1].Type == ledger.PlanGenerated {
		return iterationAt(acts, len(acts)-1)
	}
	return 0
}

// iterationAt is the iteration the action at i belongs to.
func iterationAt(acts []ledger.Action, i int) int {
	for ; i >= 0; i-- {
		if acts[i].Type == ledger.IterationStarted {
			return int(acts[i].Metadata["iteration"].AsInt())
		}
	}
	return 0
}

// outputOf is the agent's output of the run's last call that recorded one.
func (s *Server) outputOf(run *mcpserver.Run, acts []ledger.Action) outputView {
	var call *ledger.Action
	for i := len(acts) - 1; i >= 0 && call == nil; i-- {
		if acts[i].Metadata["output_file"].Str() != "" {
			call = &acts[i]
		}
	}
	if call == nil {
		return outputView{Note: "no call of this run recorded an agent's output yet"}
	}
	st, ok := run.Reader.(serve.Reader)
	if !ok {
		return outputView{Call: call.ActionID, Note: "this source keeps no output files"}
	}
	tw := &tailWriter{max: maxOutput}
	if err := serve.CopyCallOutput(tw, st.Dir(), *call); err != nil {
		return outputView{Call: call.ActionID, Text: tw.String(), Note: err.Error()}
	}
	out := outputView{Call: call.ActionID, Text: tw.String()}
	if tw.cut {
		out.Note = fmt.Sprintf("the first %d bytes are left out; `ralph view --output %d %s` shows it whole", tw.total-int64(tw.buf.Len()), call.Seq, run.ID)
	}
	return out
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	buf   bytes.Buffer
	max   int
	total int64
	cut   bool
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.total += int64(len(p))
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
		t.cut = true
	}
	return len(p), nil
}

func (t *tailWriter) String() string { return strings.ToValidUTF8(t.buf.String(), "\uFFFD") }
