// Package serve lets every ralph command reach a store another process
// holds. The process that opens a store for writing (ralph run, ralph
// resume) serves it on a unix socket: HTTP/1.1 with JSON answers and NDJSON
// streams — the runs, a run's summary, its actions (by run, plan, intent
// or seq range), the live event stream from a seq, the stop-condition
// history, predicate evaluation, verification up to a consistent head, one
// action's proof, and the run's controls (pause, resume, skip, abort,
// approve). Client is the other end; it satisfies the readers the CLI and
// the UI take, so a reading command and `ralph attach` work the same on a
// held store as on a free one.
//
// Invariants:
//   - The socket is <store>/ralph.sock, or under $XDG_RUNTIME_DIR/ralph/
//     when that path does not fit a sockaddr_un (SocketPath). It is mode
//     0600 in a store directory of mode 0700, and a connection from
//     another uid (SO_PEERCRED) is closed unanswered. Under a sandbox
//     (Options.RefuseRunPeers), so is one from a process ralph started or
//     one of theirs (procgroup.Descendant: in a call's cgroup, or below
//     ralph in the process tree), whose pid cannot be known, or that is
//     gone when accepted: Landlock does not govern connect() to a
//     pathname socket, so the socket itself keeps the run's processes
//     from reading the store or steering the run.
//   - A socket file whose process is gone is replaced; one that answers is
//     never taken over.
//   - Serving never slows the runner: streams read the ledger and the
//     loop's event bus, which never block the writer, and every write to a
//     client has a deadline, so a client that stops reading ends its own
//     stream only.
//   - A malformed request gets 400 with one sentence; no request panics
//     the server (a panic in a handler is recovered and answered 500).
package serve
