// Package cli is ralph's command line: cobra commands, flag wiring, and the
// mapping from errors to messages and exit codes.
//
// Invariants:
//   - Run is the whole program: it reads only the args and streams it is
//     given and holds no package-level mutable state, so tests drive it
//     in-process exactly as Main does.
//   - Every failure is reported as one line on stderr (plus a fix for usage
//     errors) and an exit code from DESIGN §3: 0 success, 1 failed at run
//     time, 2 usage or input error, 4 cancelled by the user. RTFS errors are
//     printed as file:line:col: message. A panic becomes an "internal error"
//     line with exit 1, never a stack trace.
//   - Commands return errors; only Run writes them.
package cli
