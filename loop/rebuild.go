package loop

import (
	"context"
	"fmt"

	"github.com/ralphloop/ralph/capability/builtin"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// Metadata that names the kv entries an action's effect wrote, so the kv
// table can be rebuilt from the chain alone.
const (
	// MetaIdempotencyKVKey, on the PlanStepCompleted of a step with
	// :idempotency, is the kv key of the idempotency record it wrote (with
	// idempotency_key and idempotency_scope, as CapabilityDeduplicated has).
	MetaIdempotencyKVKey = "idempotency_kv_key"
	// MetaIdempotencyCleared, on a CompensationCompleted, is the kv key of
	// the idempotency record the compensation cleared (the primary's effect
	// is undone, so a rerun performs it again).
	MetaIdempotencyCleared = "idempotency_cleared"
)

// idemRecord is the idempotency record a completed step leaves: its result
// (as recorded) and its PlanStepStarted action id.
func idemRecord(result rtfs.Value, stepID string) rtfs.Value {
	return rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("result"), result, rtfs.Keyword("step_action_id"), rtfs.String(stepID)))
}

// closedState is the run state a closing action leaves; ok is false for
// any other action.
func closedState(t ledger.ActionType) (state string, ok bool) {
	switch t {
	case ledger.RunCompleted:
		return StateDone, true
	case ledger.RunFailed:
		return StateFailed, true
	case ledger.RunStopped:
		return StateStopped, true
	case ledger.RunAborted:
		return StateAborted, true
	}
	return "", false
}

// RebuildKV writes into st's kv table, from runID's actions on st's chain
// alone, what the store that ran it kept there: the run record (state
// running, or how the run ended when its chain has a closing action after
// its last iteration began), every idempotency record its steps wrote or
// compensations cleared, and the kv.put values of its successful calls, in
// chain order. A store that imported a run's chain (a fleet worker taking
// over a run) then resumes it as the store that wrote it would have:
// idempotent steps are deduplicated, not run again.
//
// Values are as the chain records them: a secret is redacted there, and a
// value too large to record is a placeholder.
func RebuildKV(ctx context.Context, st *ledger.Store, runID string) error {
	acts, err := st.ByRun(runID)
	if err != nil {
		return fmt.Errorf("read run %s: %w", runID, err)
	}
	rs := &runState{id: runID}
	tally(rs, acts)
	if rs.startedID == "" {
		return fmt.Errorf("run %s has no RunStarted on this store's chain; import the run's chain before rebuilding its records", runID)
	}
	state, out, goal := StateRunning, (*Outcome)(nil), ""
	lastIter := -1
	for i := range acts {
		switch acts[i].Type {
		case ledger.RunStarted:
			goal = acts[i].Metadata["goal"].Str()
		case ledger.IterationStarted:
			lastIter = i
		}
	}
	// A closing action before the last iteration began was followed by a
	// resume (an aborted run goes on): only one after it ends the run.
	for i := max(lastIter, 0); i < len(acts); i++ {
		a := &acts[i]
		s, ok := closedState(a.Type)
		if !ok {
			continue
		}
		state = s
		out = &Outcome{Class: stop.Class(a.Metadata["class"].Str()), TriggeredBy: a.Metadata["condition"].Str(),
			Reason: a.Metadata["reason"].Str(), Evidence: a.Metadata["evidence"].Str()}
		rs.iteration, rs.cost, rs.tokens = int(a.Metadata["iterations"].AsInt()), a.Cost, a.Metadata["tokens"].AsInt()
	}
	kv := st.KV()
	updated := acts[len(acts)-1].Timestamp
	if err := kv.Put(ctx, ledger.RunKVKey(runID), runRecord(rs, goal, state, out, updated)); err != nil {
		return fmt.Errorf("rebuild run %s's record: %w", runID, err)
	}
	for i := range acts {
		key, v, ok := kvWritten(&acts[i])
		if !ok {
			continue
		}
		if err := kv.Put(ctx, key, v); err != nil {
			return fmt.Errorf("rebuild kv %q of run %s: %w", key, runID, err)
		}
	}
	return nil
}

// kvWritten is the kv entry an action's effect wrote, as its record says:
// an idempotency record set or cleared, or a value a call whose spec
// stores its result (capability.Spec.StoresResult: kv.put) stored.
func kvWritten(a *ledger.Action) (string, rtfs.Value, bool) {
	switch a.Type {
	case ledger.PlanStepCompleted:
		if k := a.Metadata[MetaIdempotencyKVKey].Str(); k != "" {
			return k, idemRecord(a.Result, a.ParentActionID), true
		}
	case ledger.CompensationCompleted:
		if k := a.Metadata[MetaIdempotencyCleared].Str(); k != "" {
			return k, rtfs.Nil, true
		}
	case ledger.CapabilityCall:
		if s, ok := builtin.Lookup(a.FunctionName); !ok || !s.StoresResult || !a.Success || len(a.Arguments) == 0 {
			break
		}
		// The call's input, as capability.Spec.InputFrom reads it: one map,
		// or positional arguments (:key first).
		key := a.Arguments[0]
		if len(a.Arguments) == 1 && key.Kind() == rtfs.KindMap {
			key = key.AsMap().GetKey("key")
		}
		if key.Kind() == rtfs.KindString {
			return ledger.UserKVKey(key.Str()), a.Result, true
		}
	}
	return "", rtfs.Nil, false
}

// LastCommit is the workspace commit (metadata :commit, set by
// RunnerOptions.OnIterationEnd) of the last counted IterationCompleted in a
// run's actions: where a resumed run's workspace continues from. It is ""
// when no counted iteration has completed, or the last one recorded no
// commit; an iteration stopped at a usage limit is not counted.
func LastCommit(acts []ledger.Action) string {
	for i := len(acts) - 1; i >= 0; i-- {
		a := &acts[i]
		if a.Type != ledger.IterationCompleted || ledger.StatusOf(a) == ledger.StatusUsageLimit {
			continue
		}
		return a.Metadata["commit"].Str()
	}
	return ""
}
