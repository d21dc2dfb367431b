package cli

import "syscall"

// hideEnvironment marks the process non-dumpable, so processes that ralph
// starts (shell.exec) cannot read its environment, and the API key in it,
// through /proc/<ralph's pid>/environ.
func hideEnvironment() {
	const prSetDumpable = 4
	// Best effort: if the kernel refuses, secrets are still stripped from the
	// children's own environment and redacted from the ledger.
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
}
