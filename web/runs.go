package web

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/serve"
)

// runRow is one run on the runs page; a batch's row holds its tasks.
type runRow struct {
	ID, State, Goal, Started, Duration, Why string
	Iterations                              int
	Cost                                    string
	Tokens                                  int64
	Live                                    bool
	Batch                                   string
	Tasks                                   []runRow
}

type runsView struct {
	Rows   []runRow
	States []string // every state a run has, for the filter
	State  string   // the filter's state ("" for all)
	Query  string   // the filter's text
	Total  int      // how many runs there are, before filtering
	Shown  int
}

// runsPage is /: every run, newest first, filtered by ?state= and ?q=.
func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	rows, err := s.runRows(r)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	v := runsView{State: r.URL.Query().Get("state"), Query: strings.TrimSpace(r.URL.Query().Get("q")), Total: len(rows)}
	for _, row := range rows {
		if !slices.Contains(v.States, row.State) {
			v.States = append(v.States, row.State)
		}
	}
	slices.Sort(v.States)
	v.Rows = nest(filterRows(rows, v.State, v.Query))
	for _, row := range v.Rows {
		v.Shown += 1 + len(row.Tasks)
	}
	s.render(w, r, http.StatusOK, "runs", v)
}

// runRows reads every run: a store's as ralph runs shows them (a run whose
// process ended without closing it is interrupted), a fleet's as its
// states say.
func (s *Server) runRows(r *http.Request) ([]runRow, error) {
	now := s.o.Now()
	if so, ok := s.o.Source.(storeOpener); ok {
		st, err := so.Open(r.Context())
		if err != nil {
			return nil, err
		}
		defer st.Close()
		runs, err := st.ListRuns()
		if err != nil {
			return nil, err
		}
		info := st.Served()
		var out []runRow
		for _, row := range serve.RunRows(loop.ByStart(runs), info, now) {
			rr := rowOf(row.RunRecord, time.Duration(row.DurationMS)*time.Millisecond, now)
			rr.Live = row.PID != 0
			out = append(out, rr)
		}
		return out, nil
	}
	runs, err := s.o.Source.Runs(r.Context())
	if err != nil {
		return nil, err
	}
	out := make([]runRow, 0, len(runs))
	for _, rec := range runs {
		var d time.Duration
		if st, err := time.Parse(time.RFC3339, rec.Started); err == nil {
			end := now
			if u, err := time.Parse(time.RFC3339, rec.Updated); err == nil && rec.State != loop.StateRunning {
				end = u
			}
			d = end.Sub(st)
		}
		rr := rowOf(rec, d, now)
		rr.Live = rec.State == loop.StateRunning
		out = append(out, rr)
	}
	return out, nil
}

// rowOf is rec as a row.
func rowOf(rec loop.RunRecord, d time.Duration, now time.Time) runRow {
	row := runRow{ID: rec.ID, State: rec.State, Goal: rec.Goal, Iterations: rec.Iterations, Tokens: rec.Tokens,
		Cost: fmt.Sprintf("$%.2f", rec.CostUSD), Batch: rec.Batch, Started: started(rec.Started, now)}
	if d > 0 {
		row.Duration = shortDuration(d)
	}
	switch {
	case rec.Condition != "":
		row.Why = rec.Class + " by " + rec.Condition
		if rec.Reason != "" {
			row.Why += ": " + rec.Reason
		}
	case rec.Reason != "":
		row.Why = rec.Reason
	}
	return row
}

// started is an RFC 3339 time as the runs page shows it.
func started(s string, now time.Time) string {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return s
	}
	if t.Local().Format("2006-01-02") == now.Local().Format("2006-01-02") {
		return t.Local().Format("15:04:05")
	}
	return t.Local().Format("2006-01-02 15:04")
}

// shortDuration is d to the second, as 1h2m3s.
func shortDuration(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// filterRows keeps the rows in state (any when "") whose id, goal, state
// or reason holds q (case-insensitive). A batch stays when one of its
// tasks matches.
func filterRows(rows []runRow, state, q string) []runRow {
	q = strings.ToLower(q)
	match := func(r runRow) bool {
		if state != "" && r.State != state {
			return false
		}
		return q == "" || strings.Contains(strings.ToLower(r.ID+"\x00"+r.Goal+"\x00"+r.State+"\x00"+r.Why), q)
	}
	keepBatch := map[string]bool{}
	for _, r := range rows {
		if r.Batch != "" && match(r) {
			keepBatch[r.Batch] = true
		}
	}
	var out []runRow
	for _, r := range rows {
		if match(r) || keepBatch[r.ID] {
			out = append(out, r)
		}
	}
	return out
}

// nest puts each task's row under its batch's (newest runs first); a task
// whose batch is not shown stands alone.
func nest(rows []runRow) []runRow {
	at := map[string]int{}
	var out []runRow
	for _, r := range rows {
		if r.Batch == "" {
			at[r.ID] = len(out)
			out = append(out, r)
		}
	}
	for _, r := range rows {
		if r.Batch == "" {
			continue
		}
		if i, ok := at[r.Batch]; ok {
			out[i].Tasks = append(out[i].Tasks, r)
		} else {
			out = append(out, r)
		}
	}
	slices.Reverse(out)
	return out
}
