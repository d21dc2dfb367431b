// Package builtin provides ralph's built-in capabilities, one row each in
// builtin.go (builtinRows): ccos.echo, ccos.math.*, shell.exec,
// fs.read/write/list, agent.run and kv.get/put.
//
// Invariants:
//   - shell.exec runs argv directly (no shell), only commands on the
//     allowlist, inside the workdir, in its own process group that a
//     timeout kills whole; each output stream is capped at 1 MiB.
//   - fs.* resolve every path through an os.Root at the workdir, so "..",
//     absolute paths outside it and escaping symlinks are refused.
//   - A capability's row is the only place its id is compared: every fact
//     other code asks of it is a field of its spec (capability.Spec), read
//     from a run's registry or, off a recorded chain, through Lookup.
//
// # Adding a capability
//
// A capability is one row and one handler, and nothing else:
//  1. its row (builtinRows in builtin.go, or the rows of its file, like
//     fileRows): its spec — id, schemas, effects, risk, an example — with
//     every fact the rest of ralph asks of it: the program a call runs
//     (Program: governance holds it to shell_allow, the prompt lists the
//     commands allowed), the agent CLI it runs (AgentCLI: agent_allow),
//     whether its result only echoes stored text (EchoesStored:
//     output_pattern passes over it), whether a call stores its result in
//     the kv (StoresResult: loop.RebuildKV), whether it prints an agent's
//     output (Printout: the UI shows it again for a recorded run), and the
//     metadata keys its calls record (Reports);
//  2. its handler, in a file of its own beside shell.go, fs.go, kv.go and
//     agent.go, made of the run's host (workdir, allowlists, environment,
//     KV; nil leaves it out of a run that cannot offer it);
//
// and its id in the README's list of capabilities, which
// TestEveryCapabilityIsDocumented holds to the rows. No code outside this
// package compares a capability's id (kinds_test.go at the repository
// root holds that). TestACapabilityIsOneRow adds a capability with nothing
// but a row and a handler and shows that the registry, governance, a run
// built by assemble.NewRun and its stop conditions, the readers of a
// recorded run and the docs check all see it.
package builtin
