// Package notify reaches the person a loop runs for (DESIGN §20): it reads
// a run's event stream, turns the events a person cares about (the run
// ended, an approval is needed, a usage-limit wait begins or ends, a
// no_progress warning, a budget crossing 50/80/100% of max_cost) into
// notifications, and sends them to the [[notify]] sinks: the terminal
// (OSC 9, OSC 777 and the bell), the desktop (freedesktop notifications
// over D-Bus), a webhook (JSON, Slack-compatible text, HMAC-SHA256
// signature, retries with backoff) and a command (the event as JSON on
// stdin).
//
// Invariants:
//   - The loop never waits for a sink: each sink has a bounded queue; an
//     event that finds it full is dropped and counted, and the count rides
//     on the sink's next notification and in the log.
//   - A sink's failure never changes the run's exit code: it is logged and
//     recorded on the chain as a NotifyFailed action.
//   - At the run's end the notifier waits at most its grace for the last
//     notifications; what is still queued then is dropped, logged and recorded.
//   - A [[notify]] table is held to its kind's row before a run starts
//     (Check, from assemble.Check, the one config check), and again by
//     New: config only decodes the tables and their lines.
//
// # Adding a sink
//
// A sink is one row and one Sender, and nothing else:
//  1. its row in kinds.go (builtinSinks): its name, the [[notify]] fields
//     it takes beyond the common ones (a field config.Notify does not
//     decode yet is one more field there), its Check (what it needs, the
//     sentence after the table's file:line), its default timeout and
//     retries, the program a table of it runs (Runs: a worker's policy
//     holds it to shell_allow), whether it reaches the terminal ralph runs
//     in (Attached: ralph attach), and its New;
//  2. its Sender, in a file of its own beside terminal.go, desktop.go,
//     webhook.go and command.go;
//
// and its line in the [[notify]] tables of docs/notify.md and
// docs/config.md, which TestEverySinkIsDocumented holds to the rows.
// A field of another kind set on a table is refused naming the kinds that
// take it; an unknown kind is refused listing the rows. No code outside
// this package compares a sink's name (kinds_test.go at the repository
// root holds that). TestASinkIsOneRow adds a sink with nothing but a row
// and a Sender and shows that the config check, a run built by
// assemble.NewRun, ralph attach, a worker's policy and the docs check all
// see it.
package notify
