package detach

import (
	"context"
	"fmt"
	"os"
)

// KeepInterrupt makes Ctrl-C in the terminal of a foreground run
// whose UI detached no longer abort the run, which was left to go on: a
// Ctrl-C then only says, on the terminal, how to get the prompt back and
// how to stop the run. SIGTERM (kill PID) still ends it gracefully. The
// returned function undoes it.
func KeepInterrupt(ctx context.Context, runID string) (restore func()) {
	h, ok := ctx.Value(hangupKey{}).(*hangup)
	if !ok {
		return func() {}
	}
	h.mu.Lock()
	prev := h.interrupt
	h.interrupt = func() {
		tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
		if err != nil {
			return // no terminal: nobody to tell
		}
		defer tty.Close()
		fmt.Fprintf(tty, "\r\nralph: run %s is detached and goes on; ctrl+z then `bg` gives the prompt back, `ralph attach %s` then a aborts it\r\n", runID, runID)
	}
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.interrupt = prev
		h.mu.Unlock()
	}
}
