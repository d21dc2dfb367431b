package loop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// attestation returns the spec's attestation id, computed once per spec
// (specs are immutable once registered).
func (o *Orchestrator) attestation(s *capability.Spec) string {
	if v, ok := o.attestations.Load(s); ok {
		return v.(string)
	}
	a := s.Attestation()
	o.attestations.Store(s, a)
	return a
}

// Step runs one step: idempotency, :pre, the body with :retry and
// :timeout-ms, :post, and the records that say what happened. A run-time
// error always closes its step with PlanStepFailed.
func (r *run) Step(ctx context.Context, req *rtfs.StepRequest) (rtfs.Value, error) {
	if r.in.BeforeStep != nil {
		if err := r.in.BeforeStep(ctx); err != nil {
			return rtfs.Nil, err
		}
	}
	f := frameOf(ctx)
	opts, optErr := parseStepOptions(req.Meta)
	isPrimary := f.primary != nil && f.primary.id == ""
	if optErr == nil && opts.idemKey != "" && r.kv != nil {
		if v, done, err := r.deduplicate(ctx, req, f, opts, isPrimary); done || err != nil {
			return v, err
		}
	}
	meta := map[string]rtfs.Value{
		"step_kind": rtfs.Keyword([...]string{"step", "loop", "loop-pass"}[req.Kind]),
		"position":  rtfs.String(fmt.Sprintf("%s:%d:%d", req.File, req.Pos.Line, req.Pos.Col)),
	}
	if req.Kind == rtfs.StepLoopPass {
		meta["pass"] = rtfs.Int(int64(req.Index))
	}
	stepID, err := r.record(ctx, &ledger.Action{Type: ledger.PlanStepStarted, ParentActionID: f.parent,
		FunctionName: req.Name, Success: true, Metadata: meta})
	if err != nil {
		return rtfs.Nil, err
	}
	if isPrimary {
		f.primary.id = stepID
		if opts.idemKey != "" {
			f.primary.idemKey = r.idemKVKey(opts)
		}
	}
	start := r.now()
	v, err := r.runStep(ctx, req, f, stepID, opts, optErr)
	end := &ledger.Action{ParentActionID: stepID, FunctionName: req.Name, DurationMS: r.now().Sub(start).Milliseconds()}
	if err != nil {
		return rtfs.Nil, r.stepFailed(ctx, end, err)
	}
	if err := r.stepCompleted(ctx, end, v, stepID, opts); err != nil {
		return rtfs.Nil, err
	}
	return v, nil
}

// deduplicate answers a step whose idempotency key has a record with the
// recorded result, recording a CapabilityDeduplicated; done is false when
// the step must run.
func (r *run) deduplicate(ctx context.Context, req *rtfs.StepRequest, f *frame, opts stepOptions, isPrimary bool) (v rtfs.Value, done bool, err error) {
	// A record rides on a deferred append: commit what is pending first.
	if err := r.durable(ctx); err != nil {
		return rtfs.Nil, true, err
	}
	rec, ok, err := r.kv.Get(ctx, r.idemKVKey(opts))
	if err != nil {
		return rtfs.Nil, true, fmt.Errorf("read idempotency record %q: %w", opts.idemKey, err)
	}
	m := rec.AsMap()
	if !ok || m == nil { // Nil is the record of a compensated step
		return rtfs.Nil, false, nil
	}
	v = m.GetKey("result")
	id, rerr := r.record(ctx, &ledger.Action{Type: ledger.CapabilityDeduplicated, ParentActionID: f.parent,
		FunctionName: req.Name, Result: v, Success: true, Metadata: map[string]rtfs.Value{
			"idempotency_key": rtfs.String(opts.idemKey), "idempotency_scope": rtfs.Keyword(opts.idemScope)}})
	if isPrimary {
		f.primary.id, f.primary.idemKey = id, r.idemKVKey(opts)
	}
	return v, true, rerr
}

// stepFailed closes the step with PlanStepFailed and returns err (or the
// error recording it).
func (r *run) stepFailed(ctx context.Context, end *ledger.Action, err error) error {
	end.Type, end.ErrorMessage = ledger.PlanStepFailed, err.Error()
	if stopped, by := stopReason(ctx); stopped == "cancelled" {
		end.Metadata = map[string]rtfs.Value{"stopped": rtfs.String(stopped), "cancelled_by": rtfs.String(by)}
	}
	if _, rerr := r.record(ctx, end); rerr != nil {
		return rerr
	}
	return err
}

// stepCompleted closes the step with PlanStepCompleted, writing its
// idempotency record in the same commit when it has a key.
func (r *run) stepCompleted(ctx context.Context, end *ledger.Action, v rtfs.Value, stepID string, opts stepOptions) error {
	end.Type, end.Success, end.Result = ledger.PlanStepCompleted, true, dataOnly(v)
	if opts.idemKey != "" && r.kv != nil {
		// The record commits with the PlanStepCompleted that accounts for it.
		sctx, staged := ledger.StageKV(context.WithoutCancel(ctx))
		if err := r.kv.Put(sctx, r.idemKVKey(opts), idemRecord(end.Result, stepID)); err != nil {
			return fmt.Errorf("record idempotency key %q: %w", opts.idemKey, err)
		}
		end.KV = staged.Writes()
		// The chain says which record the step wrote, so a store rebuilt
		// from the chain alone (RebuildKV) holds it too.
		end.Metadata = map[string]rtfs.Value{"idempotency_key": rtfs.String(opts.idemKey),
			"idempotency_scope": rtfs.Keyword(opts.idemScope), MetaIdempotencyKVKey: rtfs.String(r.idemKVKey(opts))}
	}
	if _, err := r.record(ctx, end); err != nil {
		return err
	}
	r.stats.mu.Lock()
	r.stats.steps++
	r.stats.mu.Unlock()
	return nil
}

// runStep checks :pre, then runs the body with :retry (compensating each
// failed attempt) and checks :post.
func (r *run) runStep(ctx context.Context, req *rtfs.StepRequest, f *frame, stepID string, opts stepOptions, optErr error) (rtfs.Value, error) {
	if optErr != nil {
		return rtfs.Nil, &rtfs.Error{Type: rtfs.ErrValue, Msg: fmt.Sprintf("step %q metadata: %v", req.Name, optErr), Pos: req.Pos, File: req.File}
	}
	if pre := req.Meta.GetKey("pre"); !pre.IsNil() {
		if err := r.checkContract(ctx, stepID, "pre", pre, []rtfs.Value{req.Ctx}, req.Pos, req.File); err != nil {
			return rtfs.Nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		sc := &scope{}
		v, err := r.attempt(ctx, req, stepID, sc, opts)
		if err == nil {
			if post := req.Meta.GetKey("post"); !post.IsNil() {
				if err = r.checkContract(ctx, stepID, "post", post, []rtfs.Value{req.Ctx, rtfs.NextCtx(req.Ctx, v)}, req.Pos, req.File); err != nil {
					r.compensate(ctx, sc)
					if f.primary != nil && f.primary.id == stepID {
						f.primary.postFailed = true
					}
					return rtfs.Nil, err
				}
			}
			sc.mergeInto(f.scope)
			return v, nil
		}
		r.compensate(ctx, sc)
		if attempt > opts.retries || ctx.Err() != nil || contractType(err) != "" || fatal(err) {
			return rtfs.Nil, err
		}
		backoff := opts.backoff * time.Duration(1<<min(attempt-1, 10))
		if _, rerr := r.record(ctx, &ledger.Action{Type: ledger.PlanStepRetrying, ParentActionID: stepID,
			FunctionName: req.Name, ErrorMessage: err.Error(), Metadata: map[string]rtfs.Value{
				"attempt": rtfs.Int(int64(attempt)), "backoff_ms": rtfs.Int(backoff.Milliseconds())}}); rerr != nil {
			return rtfs.Nil, rerr
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return rtfs.Nil, err
		}
	}
}

// attempt runs the body once under the step's timeout.
func (r *run) attempt(ctx context.Context, req *rtfs.StepRequest, stepID string, sc *scope, opts stepOptions) (rtfs.Value, error) {
	f := frameOf(ctx)
	bctx := withFrame(ctx, &frame{parent: stepID, scope: sc,
		contracted:  !req.Meta.GetKey("pre").IsNil() || !req.Meta.GetKey("post").IsNil(),
		compensated: f.primary != nil && f.primary.id == stepID})
	if opts.timeout > 0 {
		var cancel context.CancelFunc
		bctx, cancel = context.WithTimeoutCause(bctx, opts.timeout, &stepTimeout{name: req.Name, after: opts.timeout.String()})
		defer cancel()
	}
	v, err := req.Body(bctx)
	if err != nil && ctx.Err() == nil && errors.Is(bctx.Err(), context.DeadlineExceeded) {
		return rtfs.Nil, &rtfs.Error{Type: "rtfs/timeout", Pos: req.Pos, File: req.File,
			Msg: fmt.Sprintf("step %q timed out after %s", req.Name, opts.timeout)}
	}
	return v, err
}

// fatal reports errors no retry can fix: fuel and depth exhaustion.
func fatal(err error) bool {
	var e *rtfs.Error
	return errors.As(err, &e) && (e.Type == rtfs.ErrFuel || e.Type == rtfs.ErrDepth)
}
