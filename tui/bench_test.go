package tui

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/muesli/termenv"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

// syntheticRun scripts a run of about n actions (the fixture's loop,
// repeated), numbered from seq 1.
func syntheticRun(n int) []ledger.Action {
	perIter := len(scriptRun(1, false)) - 1
	acts := scriptRun(max(1, n/perIter), false)
	for i := range acts {
		acts[i].Seq = uint64(i + 1)
	}
	return acts
}

// loadedModel is a model at 120×40 that has taken acts, live, following.
func loadedModel(tb testing.TB, acts []ledger.Action) *model {
	o := &Options{Config: fixtureConfig(tb), RunID: fixtureRun}
	m := newModel(o, newStyles(&strings.Builder{}, termenv.ANSI256))
	m.live, m.loading = true, false
	m.Update(sizeMsg(120, 40))
	for i := 0; i < len(acts); i += maxBatch {
		feed(m, acts[i:min(len(acts), i+maxBatch)])
	}
	return m
}

// BenchmarkTUI measures one frame (View) with 100 and 100k actions in the
// chain — the target is render-100k ≤ 2× render-100, since only the rows
// in view are drawn — and the cost of taking one new action (Update).
func BenchmarkTUI(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
	}{{"render-100", 100}, {"render-100k", 100_000}} {
		b.Run(c.name, func(b *testing.B) {
			m := loadedModel(b, syntheticRun(c.n))
			b.ReportMetric(float64(m.tree.n), "rows")
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				_ = m.View()
			}
		})
	}
	// One frame of the 100k-action run at the smallest usual terminal and
	// at a large one: 80×24 must cost no more than 120×40.
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		b.Run(fmt.Sprintf("frame-%dx%d", size[0], size[1]), func(b *testing.B) {
			m := loadedModel(b, syntheticRun(100_000))
			m.Update(sizeMsg(size[0], size[1]))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				_ = m.View()
			}
		})
	}
	b.Run("render-100k-cold", func(b *testing.B) {
		// Every row drawn again (as after a resize): the row cache is cleared each frame.
		m := loadedModel(b, syntheticRun(100_000))
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			m.chain.cache.reset()
			m.plan.cache.reset()
			_ = m.View()
		}
	})
	b.Run("append-event", func(b *testing.B) {
		acts := syntheticRun(100_000)
		m := loadedModel(b, acts[:len(acts)-20]) // inside the last iteration's plan
		step := acts[len(acts)-20]
		for _, a := range acts[len(acts)-20:] {
			if a.Type == ledger.PlanStepStarted {
				step = a
				break
			}
		}
		feed(m, []ledger.Action{step})
		call := ledger.Action{Type: ledger.CapabilityCall, RunID: fixtureRun, ParentActionID: step.ActionID, FunctionName: "ccos.echo",
			Success: true, DurationMS: 1, Result: rtfs.String("ok"), Timestamp: fixtureStart}
		seq := step.Seq
		ev := []loop.Event{{Kind: loop.EventAction, Action: &call}}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			seq++
			call.Seq = seq
			m.Update(eventsMsg{events: ev})
		}
	})
}

// TestMemoryPerAction bounds what the UI keeps per action: ralph view on
// a million-action run must stay under 200 MB, Badger and the runtime
// included, so the model may keep little more than its compact rows.
func TestMemoryPerAction(t *testing.T) {
	// As the loader does: each batch is decoded afresh, taken, then garbage.
	perAction := memoryPerAction(t, func() []ledger.Action { return scriptRun(25, false) })
	if perAction > 120 {
		t.Errorf("the model keeps %.0f bytes per action; a million would take %.0f MB", perAction, perAction)
	}
}

// memoryPerAction feeds a model 200k actions, a chunk from next at a time
// (decoded afresh each time, as the loader does), and returns the heap it
// keeps per action.
func memoryPerAction(t *testing.T, next func() []ledger.Action) float64 {
	t.Helper()
	if testing.Short() {
		t.Skip("feeds a 200k-action run")
	}
	const total = 200_000
	m := loadedModel(t, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fed := 0
	for fed < total {
		chunk := next()
		for i := 0; i < len(chunk); i += loadBatch {
			feed(m, chunk[i:min(len(chunk), i+loadBatch)])
		}
		fed += len(chunk)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perAction := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(fed)
	t.Logf("%.0f bytes per action kept (%d actions, %d rows)", perAction, fed, m.tree.n)
	runtime.KeepAlive(m)
	return perAction
}

// shellRun is a classic Ralph loop's chain: each iteration runs the agent
// and the tests through shell.exec, and the tests fail with the same error.
func shellRun(iters int) []ledger.Action {
	s := &scripter{clock: fixtureStart}
	run := s.add(ledger.Action{Type: ledger.RunStarted, FunctionName: "make the tests pass", Success: true}, 0)
	for it := 1; it <= iters; it++ {
		iter := s.add(ledger.Action{Type: ledger.IterationStarted, ParentActionID: run, FunctionName: fmt.Sprintf("iteration %d", it),
			Success: true, Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(it))}}, 1)
		plan := s.add(ledger.Action{Type: ledger.PlanStarted, ParentActionID: iter, FunctionName: fmt.Sprintf("iteration-%d.rtfs", it), Success: true}, 1)
		for _, c := range []struct{ name, cmd, fail string }{
			{"Agent", "claude -p " + strings.Repeat("implement the next item of PROMPT.md ", 4), ""},
			{"Tests", "go test ./... -count=1", "exit status 1: --- FAIL: TestParse (0.01s) parse_test.go:42: want 3, got 2"},
		} {
			st := s.add(ledger.Action{Type: ledger.PlanStepStarted, ParentActionID: plan, FunctionName: c.name, Success: true}, 1)
			s.add(ledger.Action{Type: ledger.CapabilityCall, ParentActionID: st, FunctionName: "shell.exec", Success: c.fail == "",
				ErrorMessage: c.fail, Metadata: map[string]rtfs.Value{"cmd": rtfs.String(c.cmd), "exit": rtfs.String("0")}}, 5)
			end := ledger.Action{Type: ledger.PlanStepCompleted, ParentActionID: st, FunctionName: c.name, Success: true}
			if c.fail != "" {
				end.Type, end.Success, end.ErrorMessage = ledger.PlanStepFailed, false, c.fail
			}
			s.add(end, 1)
		}
		s.add(ledger.Action{Type: ledger.PlanAborted, ParentActionID: plan, FunctionName: fmt.Sprintf("iteration-%d.rtfs", it),
			ErrorMessage: "exit status 1: --- FAIL: TestParse (0.01s) parse_test.go:42: want 3, got 2"}, 1)
		s.add(ledger.Action{Type: ledger.IterationCompleted, ParentActionID: iter, FunctionName: fmt.Sprintf("iteration %d", it),
			ErrorMessage: "exit status 1: --- FAIL: TestParse (0.01s) parse_test.go:42: want 3, got 2"}, 1)
	}
	return s.acts
}

// Notes (commands, errors) repeat from iteration to iteration in a real
// loop; the model keeps one copy of each, not one per row.
func TestMemoryPerActionShellHeavy(t *testing.T) {
	perAction := memoryPerAction(t, func() []ledger.Action { return shellRun(40) })
	if perAction > 120 {
		t.Errorf("the model keeps %.0f bytes per action of a shell-heavy run; a million would take %.0f MB", perAction, perAction)
	}
}
