// Package detach lets a command's process outlive its terminal, as a run
// does: the signals that end a command or detach it (Signals; OnHangup for
// what the terminal closing does to a run, KeepInterrupt for Ctrl-C once a
// run's UI has detached, OwnEnd for a command that bounds its own end) and
// the log file a run's output goes to once no terminal shows it (LogPath,
// RedirectOutput), and starting a run in the background in a session of
// its own (Start).
//
// Invariants: the first Ctrl-C or SIGTERM cancels the command's context and
// gives the default handlers back, so a second one ends the process at once;
// output is redirected by file descriptor, so every writer holding
// os.Stdout or os.Stderr follows.
package detach
