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
package notify
