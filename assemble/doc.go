// Package assemble builds a run from a config: it is the one place a run is
// wired. `ralph run`, `ralph resume`, `ralph exec`, `ralph plan`, a fleet
// worker and the tests that run a configured loop (tui's, fleet's) build
// theirs here, so what they run is what a user's config describes; and
// `ralph submit` checks a job here (CheckJob) as a run would be checked,
// with its paths in the job's workspace.
//
// An Engine is what every plan-running command shares: the capability
// registry (the built-ins, agent.run configured from [agent], llm.ask over
// the run's model), the governance kernel with the whole constitution of
// [governance], and the orchestrator over the store. A Run adds what a loop
// needs: the stop conditions, the success-class completion predicates, the
// intent, the plan provider and the [[notify]] follower.
//
// Invariants:
//   - The governance kernel is given every [governance] field; the runner
//     watches only success-class predicates after every action (the
//     evaluator decides the others).
//   - Everything that can be checked without a store is checked before the
//     store is opened, so a bad config, a provider that cannot start or a
//     missing agent CLI leaves no store behind; a store a Run's build
//     created is removed again when what needs it (the plan's admission,
//     the provider, [[notify]]) refuses the config.
//   - Errors that are the config's fault are *ConfigError, each one
//     sentence naming the config's file:line, key or path; any other error
//     (a store that did not open) is returned as it came.
//
// Something new every run needs is wired here: in NewEngine when plans
// reach it, in NewRun when the loop does. What only a test needs (stand-in
// capabilities, a store in memory) is an explicit option (EngineOptions,
// RunOptions.Open), never a second way to build a run.
//
// The package sits above loop, config, governance, capability/builtin,
// arbiter, stop, ledger and notify, and below cli; tests of tui and fleet
// may import it, their packages never do.
package assemble
