// Package stop decides when a ralph loop stops: the stop condition kinds of
// DESIGN §8, the evaluator that runs them in priority order (seed 003, with
// the fixes of DESIGN §8), and completion predicates over an incremental
// audit index of the run (seed 000, DESIGN §7).
//
// Invariants:
//   - A condition is a function of an Input snapshot, plus the outside world
//     for command, file_exists, file_contains and no_progress. Its cache key
//     is the condition and a fingerprint of exactly the inputs it reads
//     (iteration, ledger head, audit index size, file stat, …), so a cached
//     result is never stale; only external checks (command) also expire
//     after Options.CacheTTL.
//   - Results come back in priority order (highest first, ties in the order
//     conditions were added) however they were scheduled.
//   - The decision is the met result with the strongest class — abort
//     (user_signal) > failure > success > limit — then the highest priority.
//   - A check that overruns its timeout is reported with TimedOut set and is
//     met only when its timeout_class says so; it is never silently "not met".
//   - Events never block an evaluation: when the buffer is full they are
//     dropped and counted (Evaluator.Dropped).
//   - Audit index updates are O(metadata keys) per action and audit.* queries
//     are O(1) map look-ups by string that do not allocate; a predicate sees
//     one consistent index state per evaluation.
//   - Malformed conditions and predicates are refused by FromConfig with
//     file:line; they never become "never met".
//
// # Adding a stop-condition kind
//
// A kind is two entries, one per package, and nothing else:
//  1. its declaration in config's one table (config/stopkinds.go,
//     builtinStopKinds): its name (with a Kind* constant), the [[stop]]
//     fields it needs and may take, and its default priority and class.
//     config then decodes and checks it (required fields, stray fields,
//     file:line errors, "did you mean" the kinds listed).
//  2. its builder here (builders in conditions.go): a func from the
//     checked *config.Stop to a checker (check, fingerprint, inputs).
//
// TestEveryKindHasABuilder keeps the two tables in step, and
// TestAKindIsOneEntryInEachTable adds a kind with nothing but those two
// entries and runs it.
package stop
