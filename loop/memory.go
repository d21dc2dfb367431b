package loop

import (
	"context"
	"time"
)

// releaseInterval is how often a run drops its mappings of the store's
// files (releaseMapped).
const releaseInterval = 100 * time.Millisecond

// releaseMapped keeps a long run's resident memory flat in the chain's
// length: until the returned stop is called, it drops this process's
// mappings of the store's files every releaseInterval. Badger memory-maps
// its tables and logs, and every page a flush, a compaction or a read
// touches would otherwise stay counted in the run's RSS, which would grow
// with the store; the pages stay in the page cache, so nothing is lost
// and a later read faults them back cheaply.
func (r *Runner) releaseMapped(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(releaseInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				// A hint only: where the mappings cannot be listed, RSS is
				// what the kernel makes of it, and the run goes on.
				_ = r.o.Store.ReleaseMapped()
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
