package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// The run's first line names its sandbox and, when the sandbox moved it,
// where the store is; a run with none says nothing, and no other line
// speaks of it.
func TestSandboxNote(t *testing.T) {
	for _, c := range []struct {
		a    ledger.Action
		want string
	}{
		{ledger.Action{Type: ledger.RunStarted}, ""},
		{ledger.Action{Type: ledger.RunStarted, Metadata: map[string]rtfs.Value{"sandbox": rtfs.String("bwrap+landlock")}}, " · sandbox: bwrap+landlock"},
		{ledger.Action{Type: ledger.RunStarted, Metadata: map[string]rtfs.Value{"sandbox": rtfs.String("landlock"), "store_moved": rtfs.String("/s/ralph/stores/p-1")}},
			" · sandbox: landlock · store: /s/ralph/stores/p-1 (moved out of the workdir, which the sandbox shows)"},
		{ledger.Action{Type: ledger.IterationStarted, Metadata: map[string]rtfs.Value{"sandbox": rtfs.String("landlock")}}, ""},
	} {
		if got := sandboxNote(&c.a); got != c.want {
			t.Errorf("%s %v: %q, want %q", c.a.Type, c.a.Metadata, got, c.want)
		}
	}
}

func TestCheckSandboxFlag(t *testing.T) {
	for _, ok := range []string{"", "auto", "landlock", "bwrap", "off"} {
		if err := checkSandboxFlag(ok); err != nil {
			t.Errorf("--sandbox %q: %v", ok, err)
		}
	}
	err := checkSandboxFlag("Auto")
	var ce *cliError
	if err == nil || !strings.Contains(err.Error(), `sandbox mode "Auto" is not one of`) || !errors.As(err, &ce) || ce.code != ExitUsage {
		t.Errorf("--sandbox Auto: %v, want a usage error naming the modes", err)
	}
}
