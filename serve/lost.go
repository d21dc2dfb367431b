package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// Runs whose store was lost. A store removed, replaced or turned read-only
// while a run writes to it (ledger.LostError) takes the run's record with
// it, and a detached run's log too (it lives in the store's logs/). So the
// sentence that says what happened is also kept outside the store, in
// $XDG_STATE_HOME/ralph/lost/RUN_ID.json, and `ralph runs` on that store
// directory says it for each run the store no longer lists.

// LostRun is the record kept of a run whose store was lost.
type LostRun struct {
	Run   string    `json:"run"`
	Store string    `json:"store"`
	What  string    `json:"what"`  // ledger.LostRemoved, LostReplaced, LostReadOnly
	Error string    `json:"error"` // the LostError's sentence
	At    time.Time `json:"at"`
}

// lostDir is $XDG_STATE_HOME/ralph/lost (default ~/.local/state/ralph/lost).
func lostDir() (string, error) {
	wd, err := ledger.DefaultWitnessDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(wd), "lost"), nil
}

// NoteLostRun keeps the record of run runID when err is (or wraps) its
// store's LostError, and says where on errOut; it returns err as it came.
func NoteLostRun(runID string, err error, errOut io.Writer) error {
	var lost *ledger.LostError
	if runID == "" || !errors.As(err, &lost) {
		return err
	}
	dir, derr := lostDir()
	if derr == nil {
		derr = os.MkdirAll(dir, 0o700)
	}
	if derr == nil {
		rec := LostRun{Run: runID, Store: lost.Dir, What: lost.What, Error: lost.Error(), At: time.Now().UTC()}
		b, _ := json.Marshal(rec) // strings and a time cannot fail to marshal
		derr = os.WriteFile(filepath.Join(dir, runID+".json"), append(b, '\n'), 0o600)
	}
	if derr != nil {
		fmt.Fprintf(errOut, "ralph: could not keep the record of run %s outside its lost store: %v\n", runID, derr)
	}
	return err
}

// LostRunsOf returns the lost-run records kept for the store directory
// dir, oldest first. Unreadable records are skipped.
func LostRunsOf(dir string) []LostRun {
	ld, err := lostDir()
	if err != nil {
		return nil
	}
	entries, err := os.ReadDir(ld)
	if err != nil {
		return nil
	}
	var out []LostRun
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(ld, e.Name()))
		var r LostRun
		if err != nil || json.Unmarshal(b, &r) != nil || r.Store != dir {
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b LostRun) int { return a.At.Compare(b.At) })
	return out
}

// LostRecords are the rows `ralph runs` shows for lost runs: state
// "lost", stopped by "store", the sentence as the reason.
func LostRecords(lost []LostRun) []loop.RunRecord {
	out := make([]loop.RunRecord, len(lost))
	for i, r := range lost {
		out[i] = loop.RunRecord{ID: r.Run, State: StateLost, Class: "failure", Condition: "store",
			Reason: r.Error, Updated: r.At.Format(time.RFC3339)}
	}
	return out
}

// StateLost is the state `ralph runs` gives a run whose store was lost.
const StateLost = "lost"

// WithLost adds the lost runs to the runs a store lists: a run the store
// no longer holds is listed as lost; one it holds that never closed (a
// store turned read-only keeps what it had) gets the sentence as reason.
func WithLost(runs []loop.RunRecord, lost []LostRun) []loop.RunRecord {
	for _, l := range lost {
		i := slices.IndexFunc(runs, func(r loop.RunRecord) bool { return r.ID == l.Run })
		switch {
		case i < 0:
			runs = append(runs, LostRecords([]LostRun{l})...)
		case runs[i].State == loop.StateRunning || runs[i].State == loop.StatePaused:
			runs[i].State, runs[i].Reason = StateInterrupted, l.Error
		}
	}
	return runs
}
