package procgroup

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"
)

func TestRunKeepsTheExitStatusWhenADescendantHoldsTheOutput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		script string
		exit   int
	}{{"sleep 30 & echo started", 0}, {"sleep 30 & echo started; exit 3", 3}} {
		var out CappedBuffer
		out.Limit = 100
		cmd := exec.CommandContext(context.Background(), "sh", "-c", tc.script)
		cmd.Stdout = &out
		err := Run(cmd, 100*time.Millisecond)
		var exitErr *exec.ExitError
		switch {
		case tc.exit == 0 && err != nil:
			t.Errorf("%q: %v, want success", tc.script, err)
		case tc.exit != 0 && (!errors.As(err, &exitErr) || exitErr.ExitCode() != tc.exit):
			t.Errorf("%q: %v, want exit status %d", tc.script, err, tc.exit)
		}
		if out.String() != "started\n" {
			t.Errorf("%q: output %q", tc.script, out.String())
		}
	}
}

func TestRunKillsTheGroupOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", "sleep 30 & sleep 30")
	if err := Run(cmd, time.Second); err == nil {
		t.Fatal("a cancelled command succeeded")
	}
	if ctx.Err() == nil {
		t.Fatal("Run returned before the deadline")
	}
}

func TestCappedBuffer(t *testing.T) {
	t.Parallel()
	c := CappedBuffer{Limit: 5}
	for _, s := range []string{"abc", "defg", "h"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if c.String() != "abcde" || !c.Truncated {
		t.Errorf("kept %q, truncated %t", c.String(), c.Truncated)
	}
}
