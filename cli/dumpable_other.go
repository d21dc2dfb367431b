//go:build !linux

package cli

import (
	"fmt"
	"os"
)

// hideEnvironment reads the secrets a ralph that started this one handed
// over on a pipe. This platform offers neither a non-dumpable process nor
// capability sets: docs/ledger.md "Secrets" says what that leaves.
func hideEnvironment() {
	if _, err := readSealed(); err != nil {
		fmt.Fprintf(os.Stderr, "ralph: warning: %v\n", err)
	}
}
