package serve

import (
	"time"

	"github.com/ralphloop/ralph/loop"
)

// StateInterrupted is the state RunRows gives a run recorded as running or
// paused that no process drives: its process ended without closing it.
const StateInterrupted = "interrupted"

// RunRow is one run as `ralph runs --json` prints it and GET /v1/runs
// answers it (the same fields in both): the recorded run, when it ended and
// how long it ran, and, for the run a live process drives, that process.
type RunRow struct {
	loop.RunRecord
	// Ended is when the run ended (RFC 3339), "" while it has not.
	Ended string `json:"ended,omitempty"`
	// DurationMS is how long the run ran: to its end, to now while it
	// runs, to its last record when its process died; 0 when its start is
	// unknown.
	DurationMS int64  `json:"duration_ms"`
	PID        int    `json:"pid,omitempty"`
	Attached   *bool  `json:"attached,omitempty"` // a UI follows it
	LogFile    string `json:"log_file,omitempty"`
}

// RunRows makes the rows of runs. live is the process serving the store
// (nil when none does): its run is live; any other run recorded as running
// or paused has lost its process (one process holds a store), and is
// interrupted. now is the time a live run's duration runs to.
func RunRows(runs []loop.RunRecord, live *Info, now time.Time) []RunRow {
	rows := make([]RunRow, len(runs))
	for i, r := range runs {
		row := &rows[i]
		row.RunRecord = r
		started, serr := time.Parse(time.RFC3339, r.Started)
		end, eerr := time.Parse(time.RFC3339, r.Updated)
		switch {
		case live != nil && (live.RunID == r.ID || live.drives(r)):
			attached := live.UIs > 0
			row.PID, row.Attached, row.LogFile = live.PID, &attached, live.LogFile
			end, eerr = now, nil
		case r.State == loop.StateRunning || r.State == loop.StatePaused:
			row.State = StateInterrupted
			row.Reason = "its process ended without closing it; `ralph resume " + r.ID + "` continues it"
		case r.State == StateInterrupted: // a row read back from GET /v1/runs
		case eerr == nil:
			row.Ended = r.Updated
		}
		if serr == nil && eerr == nil && !end.Before(started) {
			row.DurationMS = end.Sub(started).Milliseconds()
		}
	}
	return rows
}

// drives says whether r is a run of the batch this process drives that
// has not ended: the batch's own run or one of its task runs.
func (in *Info) drives(r loop.RunRecord) bool {
	running := r.State == loop.StateRunning || r.State == loop.StatePaused
	return in.Batch != "" && running && (r.ID == in.Batch || r.Batch == in.Batch)
}
