package detach

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// guard bounds a wait for what must happen; it never decides a result.
const guard = 30 * time.Second

func TestHangupCancelsAndArmsTheWatchdog(t *testing.T) {
	armed := make(chan string, 1)
	ctx, stop := Signals(context.Background(), func(why string) { armed <- why })
	defer stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(guard):
		t.Fatal("SIGHUP did not cancel the command's context")
	}
	if why := <-armed; why != "the hangup signal" {
		t.Errorf("the watchdog was armed for %q, want the hangup signal", why)
	}
}

func TestOnHangupClaimsTheHangup(t *testing.T) {
	ctx, stop := Signals(context.Background(), func(why string) { t.Errorf("watchdog armed for %q by a claimed hangup", why) })
	defer stop()
	claimed := make(chan struct{})
	restore := OnHangup(ctx, func() { close(claimed) })
	defer restore()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-claimed:
	case <-time.After(guard):
		t.Fatal("the run's hangup handler was not called")
	}
	if ctx.Err() != nil {
		t.Error("a claimed hangup cancelled the command")
	}
}

func TestOutsideSignalsNothingIsClaimed(t *testing.T) {
	ctx := context.Background()
	OnHangup(ctx, func() { t.Error("called") })()
	KeepInterrupt(ctx, "run")()
	OwnEnd(ctx)
}

func TestLogPath(t *testing.T) {
	if got, want := LogPath("/s", "01a2"), "/s/logs/01a2.log"; got != want {
		t.Errorf("LogPath = %q, want %q", got, want)
	}
}
