package detach

import (
	"testing"

	"github.com/ralphloop/ralph/internal/testenv"
)

func TestStartReturnsWhatAnEarlyExitSaid(t *testing.T) {
	sh := testenv.Tool(t, "sh")
	st, err := Start(sh, []string{"-c", "echo config is bad >&2; exit 2"})
	if err != nil {
		t.Fatal(err)
	}
	if string(st.Early) != "config is bad\n" || st.PID <= 0 {
		t.Errorf("Start = %+v (early %q), want what it said before it exited", st, st.Early)
	}
	// Its exit is seen within Start's short wait, unless the machine was
	// too busy to reap it by then; either way the status is its own.
	if st.Exited && st.Code != 2 {
		t.Errorf("exit status %d, want 2", st.Code)
	}
}

func TestStartOfAMissingProgramFails(t *testing.T) {
	if _, err := Start(t.TempDir()+"/missing", nil); err == nil {
		t.Error("Start of a missing program succeeded")
	}
}
