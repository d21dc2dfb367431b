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
//   - Every byte the CLI printed is read, after it exited too, until its
//     output ends or the call's own timeout (or cancellation) comes; never
//     a shorter timer.
//   - Result.Stopped says why the call was ended ("timeout", "idle-timeout",
//     "cancelled", "usage-limit"); a cancellation is never a timeout. A
//     non-zero exit is a Result, not an error; errors are for calls that
//     could not start, and for output that could not be kept (a
//     *SpoolError: TMPDIR not writable, or its file system full).
//   - Cost is what the CLI reported (CostSource "reported"), else priced
//     from Options.Price ("price"), else zero ("").
//
// Each parser reads only fields its CLI documents; docs/agents.md lists
// them with their sources. The package imports nothing of ralph's but
// internal/.
//
// # Adding an agent CLI
//
// A CLI is one entry in backends (backend.go) and its backend, in a file
// of its own as claude.go is: its Facts (whether "auto" tries it, whether
// it reports cost and tokens, its default, init and example models), the
// binary, the argv for a prompt (args, model, resume), the stream parser
// (output line → events, usage, cost, limits, denials), and its
// permissions for `ralph init`. Everything else reads the row: config's
// [agent] cli values and a worker policy's agent_allow (Known, CLIs),
// "auto" (Resolve), `ralph init --agent` (PermissionsFor, InitModel), the
// budget check and pricing (Lookup, ReportsCost, ReportsTokens,
// ConfiguredModel), and nothing outside this package compares a CLI's
// name (kinds_test.go at the repository root holds that). TestACLIIsOneRow
// adds a CLI with nothing but a row and shows all of them see it;
// TestEveryCLIIsDocumented holds docs/agents.md to the table; the
// conformance suite (agent/conformance) runs each CLI for real.
package agent
