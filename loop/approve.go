package loop

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
)

// LineApprover is an Approve (RunnerOptions) that asks y/n on in for each
// plan, on out: `ralph run --approve` in a terminal. Ctrl-C while it waits declines the
// plan, and the runner then aborts the run (the context is cancelled).
func LineApprover(in io.Reader, out io.Writer) func(context.Context, int, string) (bool, error) {
	lines := make(chan string)
	var once sync.Once
	start := func() { // one reader for the whole run; it ends with stdin
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(in)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
	}
	return func(ctx context.Context, iteration int, plan string) (bool, error) {
		once.Do(start)
		for drained := false; !drained; { // an answer typed before this plan was shown is not for it
			select {
			case _, ok := <-lines:
				drained = !ok
			default:
				drained = true
			}
		}
		fmt.Fprintf(out, "iteration %d plan:\n%s\nrun it? [y/n] ", iteration, plan)
		select {
		case line, ok := <-lines:
			if !ok {
				return false, fmt.Errorf("read approval: standard input closed")
			}
			return strings.EqualFold(strings.TrimSpace(line), "y"), nil
		case <-ctx.Done():
			fmt.Fprintln(out)
			return false, nil
		}
	}
}
