package eventually

import (
	"errors"
	"testing"
)

func TestPoll(t *testing.T) {
	n := 0
	if !Poll(func() bool { n++; return n == 3 }) || n != 3 {
		t.Fatalf("Poll stopped after %d calls, want 3", n)
	}
	n = 0
	NoError(t, "third time", func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n != 3 {
		t.Fatalf("NoError stopped after %d calls, want 3", n)
	}
}
