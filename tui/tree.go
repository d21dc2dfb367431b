package tui

import (
	"hash/maphash"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/stop"
)

// The causal chain as the UI holds it: one compact row per shown action
// (about 56 bytes plus shared strings), never the decoded actions. A
// closing action (PlanStepCompleted, IterationCompleted, …) does not get a
// row: it closes its opener's row, giving it a status, a duration and the
// closer's seq. Everything else — arguments, results, hashes — is read from
// the store when the detail view asks for it.

type nodeKind uint8

const (
	kindOther nodeKind = iota
	kindRun
	kindRunEnd
	kindIteration
	kindPlanGen
	kindLLM
	kindGovernance
	kindPlan
	kindStep
	kindCall
	kindContract
	kindCompensation
	kindStop
	kindRetry
)

type status uint8

const (
	stInfo    status = iota // a fact, neither success nor failure
	stRunning               // opened and not closed yet
	stOK
	stFailed
	stStop      // the evaluation or run end that stopped the run
	stReported  // a call that ran but reported failure (ledger.Action.ReportedFailure)
	stCancelled // cut short by a skip, an abort, a signal (metadata stopped = cancelled)
	stSkipped   // an iteration the user skipped
	stUnmet     // an iteration that ran, after which no success condition held
)

const (
	flagFolded  uint8 = 1 << iota
	flagTouched       // the user folded or unfolded it; automatic folding leaves it alone
)

type node struct {
	seq                       uint64
	label                     string
	parent, first, last, next int32 // -1: none
	endDelta                  uint32
	durMS                     uint32
	ver                       uint16 // changes whenever the row's text may change
	kind                      nodeKind
	typ                       ledger.ActionType
	st                        status
	depth                     uint8
	flags                     uint8
}

const (
	chunkBits = 12
	chunkSize = 1 << chunkBits
	// maxInterned bounds the label intern table (step names of a long
	// step-loop are all different; they are kept, just not shared).
	maxInterned = 1 << 14
	maxNote     = 200
)

// tree is the chain's rows, linked as a tree, with the list of rows the
// chain pane can show (unfolded, or matching the filter). Rows live in
// fixed-size chunks so growth never copies them.
type tree struct {
	chunks              [][]node
	n                   int32
	rootFirst, rootLast int32

	seed     maphash.Seed
	open     map[uint64]int32 // hashed action id → row, for actions that may get children
	iterKeys []uint64         // open entries added during the current iteration
	runKey   uint64           // hashed id of RunStarted: its children are top-level rows
	hasRun   bool
	iter     int32 // the current iteration's row
	step     int32 // the last step opened and not closed yet, -1 when none
	iterNum  int64
	notes    map[int32]string    // error messages and call details, by row
	opened   map[int32]time.Time // when each row still running started, for its elapsed time
	intern   map[string]string
	stops    []uint64 // seqs of StopConditionsEvaluated actions, for the history view

	visible []int32 // rows the pane shows, in order
	dirty   bool    // visible must be rebuilt
	filter  *filter
	epoch   uint32 // bumped when every row must be drawn again
	ended   bool   // the run is over: open rows will never close
}

func newTree() *tree {
	return &tree{rootFirst: -1, rootLast: -1, iter: -1, step: -1, seed: maphash.MakeSeed(),
		open: map[uint64]int32{}, notes: map[int32]string{}, opened: map[int32]time.Time{}, intern: map[string]string{}}
}

func (t *tree) at(i int32) *node { return &t.chunks[i>>chunkBits][i&(chunkSize-1)] }

func (t *tree) key(id string) uint64 { return maphash.String(t.seed, id) }

func (t *tree) str(s string) string {
	if v, ok := t.intern[s]; ok {
		return v
	}
	s = strings.Clone(s) // never keep a decoded action's buffer alive through a substring
	if len(t.intern) < maxInterned {
		t.intern[s] = s
	}
	return s
}

// closes reports whether an action of type typ closes its parent's row.
func closes(typ ledger.ActionType) bool {
	switch typ {
	case ledger.PlanStepCompleted, ledger.PlanStepFailed, ledger.PlanCompleted, ledger.PlanAborted,
		ledger.IterationCompleted, ledger.CompensationCompleted, ledger.CompensationFailed:
		return true
	}
	return false
}

// canParent reports whether actions of type typ get children.
func canParent(typ ledger.ActionType) bool {
	switch typ {
	case ledger.IterationStarted, ledger.PlanStarted, ledger.PlanStepStarted, ledger.CompensationStarted,
		ledger.CapabilityDeduplicated: // a deduplicated primary step can be compensated
		return true
	}
	return false
}

// add takes one action of the run, in seq order.
func (t *tree) add(a *ledger.Action) {
	if closes(a.Type) {
		if idx, ok := t.open[t.key(a.ParentActionID)]; ok {
			t.close(idx, a)
			if a.Type == ledger.IterationCompleted {
				t.forgetIteration()
			}
			return
		}
		// The opener was never seen: show the closer as a row of its own.
	}
	if a.Type == ledger.IterationStarted {
		if t.iter >= 0 && t.at(t.iter).flags&flagTouched == 0 {
			t.foldTail(t.iter)
		}
		t.forgetIteration()
	}
	parent := t.parentOf(a)
	idx := t.push(a, parent)
	switch {
	case a.Type == ledger.RunStarted:
		t.runKey, t.hasRun = t.key(a.ActionID), true
	case a.Type == ledger.IterationStarted:
		t.iter, t.iterNum = idx, a.Metadata["iteration"].AsInt()
		fallthrough
	case canParent(a.Type):
		k := t.key(a.ActionID)
		t.open[k] = idx
		t.iterKeys = append(t.iterKeys, k)
	case a.Type == ledger.StopConditionsEvaluated:
		t.stops = append(t.stops, a.Seq)
	}
	if isRunEnd(a.Type) && t.hasRun {
		if root := t.rootFirst; root >= 0 && t.at(root).kind == kindRun {
			r := t.at(root)
			r.st, r.endDelta = t.at(idx).st, uint32(min(a.Seq-r.seq, 1<<32-1))
			r.ver++
		}
	}
	t.placed(idx)
}

// evaluated takes the evaluation after the iteration that just closed:
// when it has success conditions and none held, the iteration is not
// drawn green (○, stUnmet) and its note is the first one's why
// ("tests: FAIL TestAdd calc_test.go:7: …").
func (t *tree) evaluated(ev *stop.Evaluation) {
	if t.iter < 0 {
		return
	}
	var first *stop.Result
	for i := range ev.Results {
		r := &ev.Results[i]
		if r.Class != stop.ClassSuccess {
			continue
		}
		if r.Met {
			return
		}
		if first == nil {
			first = r
		}
	}
	n := t.at(t.iter)
	if first == nil || n.st != stOK {
		return
	}
	n.st = stUnmet
	t.notes[t.iter] = t.str(cut(first.Name+": "+stop.Why(first), maxNote))
	n.ver++
	if t.filter != nil && t.filter.dependsOnStatus() {
		t.dirty = true
	}
}

// forgetIteration drops the parent entries of the iteration that ended:
// later actions never name them, so the table stays one iteration big.
func (t *tree) forgetIteration() {
	for _, k := range t.iterKeys {
		delete(t.open, k)
	}
	t.iterKeys = t.iterKeys[:0]
}

func isRunEnd(typ ledger.ActionType) bool {
	switch typ {
	case ledger.RunCompleted, ledger.RunFailed, ledger.RunStopped, ledger.RunAborted:
		return true
	}
	return false
}

// parentOf is the row a's row hangs under, -1 for the top level.
func (t *tree) parentOf(a *ledger.Action) int32 {
	switch {
	case a.Type == ledger.RunStarted || isRunEnd(a.Type) || a.Type == ledger.IterationStarted:
		return -1
	case a.Type == ledger.StopConditionsEvaluated: // recorded under the run; shown under its iteration
		return t.iter
	case a.ParentActionID == "":
		return -1
	}
	k := t.key(a.ParentActionID)
	if t.hasRun && k == t.runKey {
		return -1
	}
	if idx, ok := t.open[k]; ok {
		return idx
	}
	if a.Type == ledger.AgentToolUse && t.step >= 0 {
		return t.step // its CapabilityCall is recorded when the call ends: show it under the running step
	}
	return t.iter // a parent from before the view began
}

// push appends a row for a under parent.
func (t *tree) push(a *ledger.Action, parent int32) int32 {
	if int(t.n)>>chunkBits == len(t.chunks) {
		t.chunks = append(t.chunks, make([]node, chunkSize))
	}
	idx := t.n
	t.n++
	n := t.at(idx)
	*n = node{seq: a.Seq, parent: parent, first: -1, last: -1, next: -1, typ: a.Type,
		durMS: uint32(min(max(a.DurationMS, 0), 1<<32-1))}
	t.describe(n, idx, a)
	if n.st == stRunning {
		t.opened[idx] = a.Timestamp
	}
	if parent < 0 {
		if t.rootLast >= 0 {
			t.at(t.rootLast).next = idx
		} else {
			t.rootFirst = idx
		}
		t.rootLast = idx
		return idx
	}
	p := t.at(parent)
	n.depth = min(p.depth+1, 255)
	if p.last >= 0 {
		t.at(p.last).next = idx
	} else {
		p.first = idx
		p.ver++ // it now shows a fold marker
	}
	p.last = idx
	return idx
}

// describe sets the row's kind, status and label from its action, and
// its note: what failed, or a call's command.
func (t *tree) describe(n *node, idx int32, a *ledger.Action) {
	n.st = stInfo
	if !a.Success {
		n.st = stFailed
	}
	if !t.describeOpener(n, idx, a) {
		t.describeEvent(n, idx, a)
	}
	if !a.Success && a.ErrorMessage != "" {
		t.notes[idx] = t.str(cut(firstLine(a.ErrorMessage), maxNote))
	}
}

// describeOpener describes an action that opens a row for others to go
// under and a later action to close (the run, an iteration, a plan, a
// step, a compensation): it runs until then. It reports whether a is one.
func (t *tree) describeOpener(n *node, idx int32, a *ledger.Action) bool {
	fn := a.FunctionName
	switch a.Type {
	case ledger.RunStarted:
		n.kind, n.st, n.label = kindRun, stRunning, "Run · "+fn
	case ledger.IterationStarted:
		n.kind, n.st = kindIteration, stRunning
		n.label = "Iteration " + strconv.FormatInt(a.Metadata["iteration"].AsInt(), 10)
	case ledger.PlanStarted:
		n.kind, n.st = kindPlan, stRunning
		n.label = t.str(fn)
		if t.iterNum > 0 {
			n.label = "Plan " + strconv.FormatInt(t.iterNum, 10)
		}
	case ledger.PlanStepStarted:
		n.kind, n.st, n.label = kindStep, stRunning, t.str(fn)
		t.step = idx
	case ledger.CompensationStarted:
		n.kind, n.st, n.label = kindCompensation, stRunning, t.str("↺ compensate "+fn)
	default:
		return false
	}
	return true
}

// describeEvent describes an action that is a row of its own (a call, a
// plan's generation, a decision, a check, an evaluation) or the run's end:
// ✓ when it succeeded, unless its kind says otherwise.
func (t *tree) describeEvent(n *node, idx int32, a *ledger.Action) {
	ok := func() {
		if a.Success {
			n.st = stOK
		}
	}
	fn := a.FunctionName
	switch a.Type {
	case ledger.RunCompleted, ledger.RunFailed, ledger.RunStopped, ledger.RunAborted:
		t.describeRunEnd(n, a)
	case ledger.PlanGenerated:
		n.kind = kindPlanGen
		ok()
		n.label = "plan · " + t.str(planMode(a.Metadata["mode"].Str(), a.Metadata["repairs"].AsInt()))
	case ledger.LlmConsultation:
		n.kind = kindLLM
		ok()
		n.label = t.str("model " + fn + " · " + a.Metadata["mode"].Str() + "#" + strconv.FormatInt(a.Metadata["attempt"].AsInt(), 10))
	case ledger.GovernanceDecision:
		n.kind = kindGovernance
		ok()
		n.label = t.str("governance · " + fn)
	case ledger.AgentToolUse:
		n.kind, n.label = kindCall, t.str("tool "+fn)
		ok()
		if len(a.Arguments) > 0 && a.Arguments[0].Str() != "" { // the tool's input, in short
			t.notes[idx] = t.str(cut(firstLine(a.Arguments[0].Str()), maxNote))
		}
	case ledger.CapabilityCall:
		n.kind, n.label = kindCall, t.str(fn)
		ok()
		t.describeCall(n, idx, a)
	case ledger.CapabilityDeduplicated:
		n.kind, n.st, n.label = kindCall, stOK, t.str(fn+" (deduplicated)")
	case ledger.ContractCheck:
		n.kind, n.label = kindContract, t.str("contract "+fn)
		ok()
	case ledger.ContractViolation:
		n.kind, n.st, n.label = kindContract, stFailed, t.str("contract violated "+fn)
	case ledger.StopConditionsEvaluated:
		describeStopEvaluation(n, a)
	case ledger.PlanStepRetrying:
		n.kind, n.st, n.label = kindRetry, stInfo, t.str("retry "+fn)
	default:
		n.kind = kindOther
		ok()
		n.label = t.str(a.Type.String() + " " + fn)
	}
}

// describeRunEnd describes the run's closing action and ends the tree.
func (t *tree) describeRunEnd(n *node, a *ledger.Action) {
	n.kind, n.st = kindRunEnd, stFailed
	switch a.Type {
	case ledger.RunCompleted:
		n.st = stOK
	case ledger.RunStopped:
		n.st = stStop
	}
	n.label = "Run " + runEndState(a.Type) + " · " + a.FunctionName
	t.end()
}

// describeCall gives a capability call its status (a failure the call
// reported, a cancel) and its note (the command it ran, the failure).
func (t *tree) describeCall(n *node, idx int32, a *ledger.Action) {
	note := ""
	if cmd := a.Metadata["cmd"].Str(); cmd != "" && a.Success {
		note = firstLine(cmd)
	}
	if r := a.ReportedFailure(); r != "" {
		n.st = stReported
		note = strings.TrimSuffix(r+" · "+note, " · ")
	}
	if cancelled(a) {
		n.st = stCancelled
	}
	if note != "" {
		t.notes[idx] = t.str(cut(note, maxNote))
	}
}

// describeStopEvaluation says whether the stop conditions let the run
// continue or which one stopped it.
func describeStopEvaluation(n *node, a *ledger.Action) {
	n.kind, n.st, n.label = kindStop, stInfo, "stop conditions · continue"
	if a.Metadata["should_stop"].Truthy() {
		n.st = stStop
		if a.Metadata["class"].Str() == string(stop.ClassFailure) {
			n.st = stFailed // a fired failure condition is red, as the run's end
		}
		n.label = "stop conditions · STOP by " + a.Metadata["triggered_by"].Str()
	}
}

func planMode(mode string, repairs int64) string {
	s := mode
	if s == "A" || s == "B" {
		s = "mode " + s
	}
	switch repairs {
	case 0:
	case 1:
		s += " · 1 repair"
	default:
		s += " · " + strconv.FormatInt(repairs, 10) + " repairs"
	}
	return s
}

// cancelled reports whether a was cut short by a skip, an abort or a
// signal (the runner records stopped = cancelled and who asked).
func cancelled(a *ledger.Action) bool { return a.Metadata["stopped"].Str() == "cancelled" }

// close records a closing action on its opener's row.
func (t *tree) close(idx int32, a *ledger.Action) {
	n := t.at(idx)
	delete(t.opened, idx)
	if t.step == idx {
		t.step = -1
	}
	n.st = stFailed
	switch {
	case a.Type == ledger.IterationCompleted && a.Metadata["status"].Str() == "skipped":
		n.st = stSkipped
	case cancelled(a):
		n.st = stCancelled
	case a.Success:
		n.st = stOK
	}
	n.durMS = uint32(min(max(a.DurationMS, 0), 1<<32-1))
	n.endDelta = uint32(min(a.Seq-n.seq, 1<<32-1))
	n.ver++
	switch {
	case !a.Success && a.ErrorMessage != "":
		t.notes[idx] = t.str(cut(firstLine(a.ErrorMessage), maxNote))
	case a.Type == ledger.IterationCompleted && a.Metadata["status"].Str() == "skipped":
		t.notes[idx] = "skipped"
	}
	if t.filter != nil && t.filter.dependsOnStatus() { // it may match now, or no longer
		t.dirty = true
	}
}

// iterationOf is the number of the iteration row idx belongs to ("" for
// rows outside any iteration: the run's own).
func (t *tree) iterationOf(idx int32) string {
	for i := idx; i >= 0; i = t.at(i).parent {
		if n := t.at(i); n.kind == kindIteration {
			return strings.TrimPrefix(n.label, "Iteration ")
		}
	}
	return ""
}

// iterationOpen reports whether the current iteration has started and not
// yet closed (between iterations, during loop.delay, there is none).
func (t *tree) iterationOpen() bool {
	return t.iter >= 0 && t.at(t.iter).st == stRunning && !t.ended
}

// placed updates the visible list for a new row: appended when it is the
// last row in tree order, a rebuild otherwise (a compensation under an
// earlier step).
func (t *tree) placed(idx int32) {
	if t.dirty {
		return
	}
	if t.filter != nil {
		if t.filter.match(t, idx) {
			t.visible = append(t.visible, idx)
		}
		return
	}
	atEnd := true
	for p := t.at(idx).parent; p >= 0; p = t.at(p).parent {
		pn := t.at(p)
		if pn.flags&flagFolded != 0 {
			return
		}
		if pn.next >= 0 {
			atEnd = false
		}
	}
	if atEnd {
		t.visible = append(t.visible, idx)
	} else {
		t.dirty = true
	}
}

// rebuild recomputes the visible list: a walk that skips folded subtrees,
// so it costs the rows shown, not the rows held; or, with a filter, every
// matching row in chain order.
func (t *tree) rebuild() {
	t.visible = t.visible[:0]
	t.dirty = false
	if t.filter != nil {
		for i := int32(0); i < t.n; i++ {
			if t.filter.match(t, i) {
				t.visible = append(t.visible, i)
			}
		}
		return
	}
	i := t.rootFirst
	for i >= 0 {
		t.visible = append(t.visible, i)
		n := t.at(i)
		if n.first >= 0 && n.flags&flagFolded == 0 {
			i = n.first
			continue
		}
		for i >= 0 && t.at(i).next < 0 {
			i = t.at(i).parent
		}
		if i >= 0 {
			i = t.at(i).next
		}
	}
}

// setFolded folds or unfolds row idx.
func (t *tree) setFolded(idx int32, folded, byUser bool) {
	n := t.at(idx)
	if (n.flags&flagFolded != 0) == folded {
		return
	}
	n.flags ^= flagFolded
	if byUser {
		n.flags |= flagTouched
	}
	n.ver++
	if t.filter == nil {
		t.dirty = true
	}
}

// foldTail folds row idx when its subtree ends the visible list (the
// previous iteration when a new one starts): the list is cut, not rebuilt.
func (t *tree) foldTail(idx int32) {
	n := t.at(idx)
	if n.flags&flagFolded != 0 || n.first < 0 {
		return
	}
	n.flags |= flagFolded
	n.ver++
	if t.dirty || t.filter != nil {
		if t.filter == nil {
			t.dirty = true
		}
		return
	}
	for p := len(t.visible) - 1; p >= 0; p-- {
		if t.visible[p] == idx {
			t.visible = t.visible[:p+1]
			return
		}
	}
	t.dirty = true
}

// sync rebuilds the visible list if it is stale.
func (t *tree) sync() {
	if t.dirty {
		t.rebuild()
	}
}

// setFilter shows only rows matching f (nil: the folded tree again).
func (t *tree) setFilter(f *filter) {
	t.filter = f
	t.dirty = true
	t.epoch++ // a filtered row shows its iteration beside it
}

// end marks the run over: rows still open will never close.
func (t *tree) end() {
	if !t.ended {
		t.ended = true
		t.epoch++
	}
}
