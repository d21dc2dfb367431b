package tui

import (
	"fmt"
	"testing"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/ralphloop/ralph/ledger"
)

// The batch view at 80×24 and 120×40: the scripted batch as it ended,
// as it goes on (followed, US-002 back from the merge queue, US-003
// working), and a task's run opened from it.
func TestGoldenBatch(t *testing.T) {
	acts := scriptBatch()
	rec := batchRecord(acts)
	ended, _ := batchStore(t, acts, &rec)
	cut := 0
	for i := range acts {
		if acts[i].Type == ledger.IterationCompleted && acts[i].RunID == fixtureR3 && cut == 0 {
			cut = i + 1
		}
	}
	going, _ := batchStore(t, acts[:cut], nil)
	cases := []struct {
		name  string
		setup func(t *testing.T, w, h int) *model
	}{
		{"ended", func(t *testing.T, w, h int) *model { return viewModel(t, ended, fixtureBatch, w, h) }},
		{"following", func(t *testing.T, w, h int) *model {
			m := newModel(&Options{Store: going, RunID: fixtureBatch, Now: batchNow, GoesOn: "process 4242"}, testStyles())
			m.update(sizeMsg(w, h))
			m.update(followMsg{}) // as load says before its last messages, when it goes on to follow
			loadInto(t, m, going, fixtureBatch)
			return m
		}},
		{"taskrun", func(t *testing.T, w, h int) *model {
			m := viewModel(t, ended, fixtureBatch, w, h)
			keys(m, "down", "enter")
			return m
		}},
	}
	for _, c := range cases {
		for _, size := range [][2]int{{80, 24}, {120, 40}} {
			t.Run(fmt.Sprintf("%s/%dx%d", c.name, size[0], size[1]), func(t *testing.T) {
				m := c.setup(t, size[0], size[1])
				golden.RequireEqual(t, []byte(m.View()+"\n"))
			})
		}
	}
}
