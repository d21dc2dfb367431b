package cli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/ledger"
)

// Every process ends (DESIGN §18). Two bounds hold whatever Badger does:
//
//   - A store's Close gives Badger at most ledger.DefaultCloseTimeout (10 s)
//     to flush and stop; past it the store is left as it is on disk, and
//     the command, whatever it would have ended with, exits 1 naming the
//     store and its last witnessed action (stuckStores, reported by Run).
//   - After a signal that ends the command (Ctrl-C, SIGTERM, or SIGHUP once
//     a UI run has ended), ralph exits within stopBound: the command ends by
//     itself well within it (a run's compensations get loop's
//     SignalCompensationGrace of it), and if it has not, the watchdog exits
//     the process (status 4, the status of a cancelled command), naming
//     each store it leaves as it is. A second signal ends it at once.

// stopBound is how long ralph may take to end after a signal.
const stopBound = 4500 * time.Millisecond

// liveStores are the stores this process opened for writing, for the
// watchdog's sentence; stuck are the StuckErrors of closes that passed
// their bound, for Run to report.
var (
	storesMu   sync.Mutex
	liveStores []*ledger.Store
	stuck      []*ledger.StuckError
	watchdog   *time.Timer // armed by the first signal that ends the command
)

// keepStore notes a store this process opened for writing.
func keepStore(st *ledger.Store) {
	storesMu.Lock()
	defer storesMu.Unlock()
	liveStores = slices.DeleteFunc(liveStores, (*ledger.Store).Closed)
	liveStores = append(liveStores, st)
}

// noteStuck is every store's Options.OnCloseStuck.
func noteStuck(e *ledger.StuckError) {
	storesMu.Lock()
	stuck = append(stuck, e)
	storesMu.Unlock()
}

// reportStuck says, on stderr, which stores did not close within their
// bound, and returns the exit status the command ends with: code, or 1 for
// a command that would have succeeded.
func reportStuck(stderr io.Writer, code int) int {
	storesMu.Lock()
	errs := stuck
	stuck = nil
	storesMu.Unlock()
	for _, e := range errs {
		fmt.Fprintf(stderr, "ralph: %s\n", e)
	}
	if len(errs) > 0 && code == ExitOK {
		return ExitFailure
	}
	return code
}

// armWatchdog makes sure the process exits within stopBound from now
// (the first call counts; later ones change nothing): why is what asked it
// to stop ("the terminated signal").
func armWatchdog(why string, stderr io.Writer) {
	storesMu.Lock()
	defer storesMu.Unlock()
	if watchdog != nil {
		return
	}
	watchdog = time.AfterFunc(stopBound, func() {
		fmt.Fprintf(stderr, "ralph: %s\n", watchdogSentence(why))
		os.Exit(ExitCancelled)
	})
}

// watchdogSentence says that ralph exits without having ended cleanly, and
// what it leaves: each store still open, with its last witnessed action.
func watchdogSentence(why string) string {
	storesMu.Lock()
	open := slices.DeleteFunc(slices.Clone(liveStores), (*ledger.Store).Closed)
	storesMu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "did not end within %s of %s, so it exits now", stopBound, why)
	for i, st := range open {
		sep := "; "
		if i > 0 {
			sep = "; and "
		}
		fmt.Fprintf(&b, "%sledger store %s is left as it is on disk (the next run or resume on it recovers it)", sep, st.Dir())
		switch w, seq := st.Witnessed(); {
		case w != "" && seq > 0:
			fmt.Fprintf(&b, ", its last witnessed action seq %d (%s)", seq, w)
		case w != "":
			fmt.Fprintf(&b, ", with no witnessed action yet (%s)", w)
		}
	}
	return b.String()
}
