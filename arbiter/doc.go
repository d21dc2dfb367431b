// Package arbiter turns an intent into a checked RTFS plan (seed 004): the
// provider types the loop calls, the static and script providers, the Model
// seam model-backed providers implement, and the pipeline that wraps a
// Model — Mode A (direct RTFS with compact repair hints), Mode B (JSON IR,
// validated, topologically sorted and compiled to RTFS), canonical IR and
// the diff between a model's IR and the plan it became.
//
// Invariants:
//   - A model's answer is untrusted: whatever it holds ends as a plan that
//     passed every check (parse, allowed forms, capability ids, arity and
//     types, governance admission) or as a NoPlanError that says why. Sizes
//     are capped (the answer searched, candidates tried, JSON nesting,
//     hints, recorded text), so no answer costs unbounded time or memory.
//   - Every model exchange is reported to the request's Observer as it
//     completes, with the SHA-256 of the prompt sent and the prompt, answer
//     and error with secrets redacted.
//   - Errors wrapping ErrFatal come back at once, still wrapped.
//   - One Plan call makes at most 1+MaxRepairs exchanges per mode. The
//     command provider stops after two answers in a row that hold no plan
//     at all (a coding agent doing the work itself), skipping Mode B, with
//     an ErrFatal that says to use [agent].
//   - Compilation and canonicalisation are deterministic: the same IR gives
//     the same RTFS, the same plan the same canonical IR, byte for byte.
package arbiter
