// Package agent runs coding agent CLIs (Claude Code, Codex, Gemini CLI,
// OpenCode, or any command) for one prompt and turns what they print into
// events: text, tool uses and results, token usage, cost, session id, the
// final answer, errors and account limits.
//
// Invariants:
//   - Output is parsed incrementally, line by line as it arrives; OnEvent
//     sees events in stream order, all before Run returns.
//   - A line a parser does not know, or cannot decode, becomes an EventRaw;
//     no output of a CLI makes Run fail or panic.
//   - Every call runs in a process group of its own with a parent-death
//     signal (Linux), and the group is killed on every way out of Run:
//     exit, timeout, idle timeout, cancellation. Nothing an agent started
//     outlives the call or ralph.
//   - Result.Stopped says why the call was ended ("timeout", "idle-timeout",
//     "cancelled", "usage-limit"); a cancellation is never a timeout. A
//     non-zero exit is a Result, not an error; errors are for calls that
//     could not start.
//   - Cost is what the CLI reported (CostSource "reported"), else priced
//     from Options.Price ("price"), else zero ("").
//
// Each parser reads only fields its CLI documents; docs/agents.md lists
// them with their sources. The package imports nothing of ralph's but
// internal/.
package agent
