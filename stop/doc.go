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
// A kind is one row and one checker, and nothing else:
//  1. its row in kinds.go (builtinKinds): its name (with a Kind* constant),
//     the [[stop]] fields it needs and may take, its default priority and
//     class, and every fact other code asks of it — where its answer
//     comes from (Reads, which every row must say: replay), its why line, what it bounds (Limits: the runner's
//     budgets and deadline, the UI's bars, a worker's policy), the program
//     it runs (Runs: a worker's shell_allow), whether notify warns of it
//     (Streak, Spend), its default timeout — and its Build;
//  2. its checker, a type with check, fingerprint and inputs, beside the
//     others (conditions_limits.go for in-process checks,
//     conditions_world.go for those that read files or run commands).
//
// FromConfig checks a table against the row (required and stray fields,
// classes, with the config's file:line) before Build sees it; config only
// decodes the tables. No code outside this package compares a kind's name
// (kinds_test.go at the repository root holds that), and inside it code
// reads the row rather than the name (only the composites all, any and not
// are handled structurally). TestAKindIsOneRow adds a kind with nothing but
// a row and a checker and shows that validation, evaluation, the why line,
// budgets, replay and the docs check all see it; TestEveryKindIsDocumented
// holds docs/stop.md's table to the rows.
package stop
