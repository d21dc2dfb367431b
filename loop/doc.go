// Package loop runs plans and loops. The orchestrator is the rtfs.Host: it
// admits a plan through governance, evaluates it, and records every step,
// call, contract check and compensation on the causal chain.
//
// Invariants:
//   - Every PlanStepStarted is closed by exactly one PlanStepCompleted or
//     PlanStepFailed, whatever the failure.
//   - A CapabilityCall is recorded as a child of its step and carries the
//     constitutional rule ids, the capability attestation id and the
//     admission decision id.
//   - Compensations run LIFO per scope (a step, a parallel branch, the
//     plan), on a later failure, a failed postcondition or invariant, and on
//     abort; a failed compensation is recorded and reported, never dropped.
//   - A step with a completed idempotency key (plan, intent or global scope)
//     is not run again, even after a restart: its recorded result is reused.
package loop
