package tui

import (
	"strings"
	"testing"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// The header names the sandbox RunStarted records; a run with none says
// nothing of it.
func TestHeaderSaysTheSandbox(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		meta map[string]rtfs.Value
		want bool
	}{
		{map[string]rtfs.Value{"sandbox": rtfs.String("bwrap+landlock")}, true},
		{nil, false},
	} {
		s := &scripter{clock: fixtureStart}
		s.add(ledger.Action{Type: ledger.RunStarted, FunctionName: "Make the tests pass", Success: true, Metadata: c.meta}, 0)
		st, stored := fixtureStore(t, s.acts)
		m := testModel(t, st, true, 200, 40)
		feed(m, stored)
		if h := m.header(); strings.Contains(h, "sandbox: bwrap+landlock") != c.want || (!c.want && strings.Contains(h, "sandbox")) {
			t.Errorf("metadata %v: header %q", c.meta, h)
		}
	}
}
