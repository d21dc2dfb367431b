package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/sandbox"
)

// --sandbox MODE on run, resume and worker: the [sandbox] mode the run's
// processes are confined by, over the config's (DESIGN §22).

// addSandboxFlag defines --sandbox on fl.
func addSandboxFlag(fl *pflag.FlagSet, mode *string) {
	fl.StringVar(mode, "sandbox", "", "confine every process of the run: `MODE` auto, landlock, bwrap or off (overrides [sandbox] mode)")
}

// checkSandboxFlag refuses a --sandbox that names no mode (exit 2).
func checkSandboxFlag(mode string) error {
	if mode == "" {
		return nil
	}
	if _, err := sandbox.ParseMode(mode); err != nil {
		return usageErrorf("--sandbox: %v", err)
	}
	return nil
}

// closeSandbox closes the run's sandbox once the run has ended; what
// fails to close is said on errOut (the run's outcome stands).
func closeSandbox(rs *assemble.Run, errOut io.Writer) {
	if err := rs.CloseSandbox(); err != nil {
		fmt.Fprintf(errOut, "ralph: closing the run's sandbox: %v\n", err)
	}
}

// ralphKeyFile is the signing key RALPH_KEY names, which a sandbox hides
// with the store ("" when unset).
func ralphKeyFile() string { return os.Getenv("RALPH_KEY") }

// sandboxNote is what the run's first line (RunStarted) says of its
// sandbox: the mechanism that confines its processes, and where its store
// went when the sandbox moved it out of the workdir; "" for a run with
// none, which says nothing, as before there was a sandbox.
func sandboxNote(a *ledger.Action) string {
	if a.Type != ledger.RunStarted {
		return ""
	}
	note := ""
	if m, ok := a.Metadata["sandbox"]; ok {
		note = " · sandbox: " + m.Str()
	}
	if d := a.Metadata["store_moved"].Str(); d != "" {
		note += " · store: " + d + " (moved out of the workdir, which the sandbox shows)"
	}
	return note
}
