package arbiter

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// sleepCtx waits the whole backoff in the bubble's clock (no real time
// passes), and a cancellation ends the wait at once with its cause.
func TestSleepCtxOnTheBubbleClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := sleepCtx(context.Background(), 5*time.Minute); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 5*time.Minute {
			t.Errorf("waited %s on the bubble's clock, want 5m", waited)
		}

		cause := errors.New("the user aborted")
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan error, 1)
		start = time.Now()
		go func() { done <- sleepCtx(ctx, time.Hour) }()
		time.Sleep(time.Minute)
		synctest.Wait() // the sleeper is blocked on its timer
		cancel(cause)
		if err := <-done; !errors.Is(err, cause) {
			t.Errorf("a cancelled wait returned %v, want its cause", err)
		}
		if waited := time.Since(start); waited != time.Minute {
			t.Errorf("the cancelled wait took %s, want the minute before the cancel", waited)
		}
		if err := sleepCtx(ctx, time.Hour); !errors.Is(err, cause) {
			t.Errorf("a wait on an ended context returned %v", err)
		}
	})
}
