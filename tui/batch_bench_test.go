package tui

import (
	"fmt"
	"testing"
	"time"

	"github.com/muesli/termenv"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

// syntheticBatch is a batch of n tasks, each one run of iters iterations
// (the fixture batch's iteration, four actions and an evaluation), all
// merged but the last, which still runs.
func syntheticBatch(n, iters int) []ledger.Action {
	s := &batchScript{clock: fixtureStart}
	s.add(fixtureBatch, ledger.Action{Type: ledger.BatchStarted, Success: true, Metadata: map[string]rtfs.Value{
		ledger.MetaBatchSource: rtfs.String("prd:prd.json"), ledger.MetaBatchTarget: rtfs.String("ralph/greetings"),
		ledger.MetaBatchTasks: rtfs.Int(int64(n)), ledger.MetaBatchParallel: rtfs.Int(4)}}, 0)
	for i := range n {
		task, run := fmt.Sprintf("US-%03d", i+1), fmt.Sprintf("0193a1b2-%04x-7000-8000-000000000000", i+1)
		s.taskStarted(task, "Task number "+task, run, 1, 10)
		start := s.runStart(run, 10)
		for it := 1; it <= iters; it++ {
			s.iteration(run, start, it, 0.01, 0, it == iters, 500)
		}
		if i == n-1 {
			break
		}
		s.runEnd(run, start, ledger.RunCompleted, "done", "success", "the command held", 5)
		s.taskMerged(task, run, fmt.Sprintf("%040x", i+1), 100)
		s.taskEnded(task, run, ledger.TaskVerdictMerged, "", true, 3)
	}
	for i := range s.acts {
		s.acts[i].Seq = uint64(i + 1)
	}
	return s.acts
}

// BenchmarkBatchView measures what the batch view costs: taking one
// action of a batch (its own or a task run's), and one frame of a batch of
// 200 tasks while its last task runs (its row's time changes each second).
func BenchmarkBatchView(b *testing.B) {
	acts := syntheticBatch(200, 5)
	b.Run("observe", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			bt := newBatch(fixtureBatch)
			for i := range acts {
				bt.observe(&acts[i])
			}
			n += len(acts)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/action")
	})
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		b.Run(fmt.Sprintf("frame-%dx%d", size[0], size[1]), func(b *testing.B) {
			now := fixtureStart.Add(time.Hour)
			m := newModel(&Options{RunID: fixtureBatch, GoesOn: "bench", Now: func() time.Time { return now }},
				newStyles(&noWriter{}, termenv.ANSI256))
			m.update(sizeMsg(size[0], size[1]))
			evs := make([]loop.Event, len(acts))
			for i := range acts {
				evs[i] = loop.Event{Kind: loop.EventAction, Action: &acts[i]}
			}
			m.update(eventsMsg{events: evs})
			m.update(loadedMsg{})
			m.update(followMsg{})
			b.ReportMetric(float64(len(m.batchV.b.tasks)), "tasks")
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Second)
				_ = m.View()
			}
		})
	}
}

type noWriter struct{}

func (noWriter) Write(p []byte) (int, error) { return len(p), nil }
