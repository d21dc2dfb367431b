package stop

import (
	"sync"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// Index is the incremental audit index of one run: per function name, how
// many of its outcomes succeeded and failed, where the first and last of
// each happened, its last result, and the metadata values it was recorded
// with. Observe updates it in O(1) per action (O(metadata keys) to be
// exact); predicates read it in O(1) per audit.* call, without allocating.
//
// Which actions are outcomes: CapabilityCall, CapabilityDeduplicated and
// InternalStep (succeeded or failed as their Success field says),
// PlanStepCompleted (succeeded) and PlanStepFailed (failed). Lifecycle
// records such as PlanStepStarted are not outcomes, so "Tests" succeeding
// means the step completed, not that it started. IterationStarted counts
// iterations; the cost is the sum over CapabilityCall and LlmConsultation.
//
// An Index is safe for concurrent use: Observe takes the write lock and
// Eval holds the read lock for a whole predicate evaluation, so a predicate
// sees one consistent state.
type Index struct {
	mu        sync.RWMutex
	fns       map[string]*fnStats
	observed  uint64 // actions observed (all types)
	lastSeq   uint64
	iteration int64
	cost      float64
	trace     *[]Evidence // non-nil only inside Explain
}

// fnStats is what the index knows about one function name.
type fnStats struct {
	ok, fail            int64
	firstOK, lastOK     ref
	firstFail, lastFail ref
	last                ref
	lastResult          rtfs.Value
	meta                map[string]map[string]ref // key → value text → first action with it
}

// ref names an action by seq and id.
type ref struct {
	seq uint64
	id  string
}

// Evidence is one action a predicate looked at and what it decided.
type Evidence struct {
	Query    string // e.g. audit.succeeded? "shell.exec"
	Seq      uint64 // 0 when no action matched
	ActionID string
	Holds    bool
}

// NewIndex returns an empty index.
func NewIndex() *Index { return &Index{fns: map[string]*fnStats{}} }

// Observe adds one action to the index. Actions must come in seq order;
// one whose seq is not above the last observed is ignored, so replaying an
// overlap (resume, subscribe) is harmless. An action with seq 0 (not from a
// ledger) is given the next seq.
func (ix *Index) Observe(a *ledger.Action) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	seq := a.Seq
	switch {
	case seq == 0: // built by hand (tests, benchmarks): keep the order it came in
		seq = ix.lastSeq + 1
	case seq <= ix.lastSeq:
		return
	}
	ix.observed++
	ix.lastSeq = seq
	switch a.Type {
	case ledger.IterationStarted:
		// An iteration a crash interrupted starts again under its own
		// number: count iterations by number, not by records.
		if n := a.Metadata["iteration"].AsInt(); n > 0 {
			ix.iteration = max(ix.iteration, n)
		} else {
			ix.iteration++
		}
	case ledger.LlmConsultation:
		ix.cost += a.Cost
	}
	ok, outcome := isOutcome(a)
	if !outcome {
		return
	}
	if a.Type == ledger.CapabilityCall {
		ix.cost += a.Cost
	}
	s := ix.fns[a.FunctionName]
	if s == nil {
		s = &fnStats{}
		ix.fns[a.FunctionName] = s
	}
	r := ref{seq: seq, id: a.ActionID}
	if ok {
		if s.ok == 0 {
			s.firstOK = r
		}
		s.ok++
		s.lastOK = r
	} else {
		if s.fail == 0 {
			s.firstFail = r
		}
		s.fail++
		s.lastFail = r
	}
	s.last = r
	s.lastResult = a.Result
	for k, v := range a.Metadata {
		vals := s.meta[k]
		if vals == nil {
			if s.meta == nil {
				s.meta = map[string]map[string]ref{}
			}
			vals = map[string]ref{}
			s.meta[k] = vals
		}
		text := metaText(v)
		if _, seen := vals[text]; !seen {
			vals[text] = r
		}
	}
}

// isOutcome reports whether a is an outcome and whether it succeeded.
func isOutcome(a *ledger.Action) (ok, outcome bool) {
	switch a.Type {
	case ledger.CapabilityCall, ledger.CapabilityDeduplicated, ledger.InternalStep:
		return a.Success, true
	case ledger.PlanStepCompleted:
		return true, true
	case ledger.PlanStepFailed:
		return false, true
	}
	return false, false
}

// metaText is how a metadata value is compared: strings and keywords by
// their text, anything else by its canonical RTFS form.
func metaText(v rtfs.Value) string {
	switch v.Kind() {
	case rtfs.KindString, rtfs.KindKeyword:
		return v.Str()
	}
	return rtfs.Print(v)
}

// Observed returns how many actions the index has seen; it changes exactly
// when the index does, so it is the index's fingerprint.
func (ix *Index) Observed() uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.observed
}

// The queries below are called by the audit.* builtins with the read lock
// held by Eval.

func (ix *Index) note(q string, holds bool, r ref) {
	if ix.trace != nil {
		*ix.trace = append(*ix.trace, Evidence{Query: q, Holds: holds, Seq: r.seq, ActionID: r.id})
	}
}

func (ix *Index) succeeded(fn string) bool {
	s := ix.fns[fn]
	holds := s != nil && s.ok > 0
	if ix.trace != nil {
		var r ref
		if holds {
			r = s.firstOK
		}
		ix.note(`audit.succeeded? "`+fn+`"`, holds, r)
	}
	return holds
}

func (ix *Index) failed(fn string) bool {
	s := ix.fns[fn]
	holds := s != nil && s.fail > 0
	if ix.trace != nil {
		var r ref
		if holds {
			r = s.firstFail
		}
		ix.note(`audit.failed? "`+fn+`"`, holds, r)
	}
	return holds
}

func (ix *Index) metadata(fn, key, value string) bool {
	var r ref
	holds := false
	if s := ix.fns[fn]; s != nil {
		r, holds = s.meta[key][value]
	}
	if ix.trace != nil {
		ix.note(`audit.metadata? "`+fn+`" "`+key+`" "`+value+`"`, holds, r)
	}
	return holds
}

// count returns how many outcomes of fn have the status: "succeeded",
// "failed" or "any".
func (ix *Index) count(fn, status string) (int64, bool) {
	s := ix.fns[fn]
	var n int64
	switch status {
	case "succeeded":
		if s != nil {
			n = s.ok
		}
	case "failed":
		if s != nil {
			n = s.fail
		}
	case "any":
		if s != nil {
			n = s.ok + s.fail
		}
	default:
		return 0, false
	}
	if ix.trace != nil {
		var r ref
		if s != nil {
			r = s.last
		}
		ix.note(`audit.count "`+fn+`" :`+status, n > 0, r)
	}
	return n, true
}

func (ix *Index) lastResultOf(fn string) rtfs.Value {
	s := ix.fns[fn]
	if s == nil {
		ix.note(`audit.last-result "`+fn+`"`, false, ref{})
		return rtfs.Nil
	}
	ix.note(`audit.last-result "`+fn+`"`, true, s.last)
	return s.lastResult
}

// before reports whether some success of a precedes some success of b:
// a's first success comes before b's last one.
func (ix *Index) before(a, b string) bool {
	sa, sb := ix.fns[a], ix.fns[b]
	holds := sa != nil && sb != nil && sa.ok > 0 && sb.ok > 0 && sa.firstOK.seq < sb.lastOK.seq
	if ix.trace != nil {
		var r ref
		if holds {
			r = sb.lastOK
		}
		ix.note(`audit.before? "`+a+`" "`+b+`"`, holds, r)
	}
	return holds
}
