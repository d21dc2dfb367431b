package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
)

// fuzzVerdicts are what a TaskEnded's verdict may say, and what it should not.
var fuzzVerdicts = []string{ledger.TaskVerdictMerged, ledger.TaskVerdictConflict, ledger.TaskVerdictRed, ledger.TaskVerdictFailed,
	ledger.TaskVerdictStopped, ledger.TaskVerdictAborted, ledger.TaskVerdictError, ledger.TaskVerdictCancelled, "", "späť\x1b[31m\n"}

// fuzzActions makes a batch's chain of data: each 4 bytes an action of the
// batch or one of its task runs, in any order, with metadata of any kind.
func fuzzActions(data []byte) []ledger.Action {
	at := fixtureStart
	run := func(b byte) string { return "0193a1b2-f000-7000-8000-00000000000" + string(rune('0'+b%4)) }
	str := func(b byte, s string) rtfs.Value {
		if b&0x80 != 0 {
			return rtfs.Int(int64(b)) // a value of the wrong kind
		}
		return rtfs.String(s)
	}
	acts := []ledger.Action{{Type: ledger.BatchStarted, RunID: fixtureBatch, Timestamp: at,
		Metadata: map[string]rtfs.Value{ledger.MetaBatchTasks: rtfs.Int(3), ledger.MetaBatchTarget: rtfs.String("t")}}}
	for i := 0; i+3 < len(data); i += 4 {
		op, a, b, c := data[i], data[i+1], data[i+2], data[i+3]
		at = at.Add(time.Duration(c) * time.Second)
		task := str(a, []string{"US-1", "US-2", "US-3\x1b]0;x\x07"}[a%3])
		md := map[string]rtfs.Value{ledger.MetaTask: task, ledger.MetaTaskRun: str(b, run(b)), ledger.MetaTaskTry: rtfs.Int(int64(c % 3)),
			ledger.MetaTaskAttempt: rtfs.Int(int64(c % 2)), ledger.MetaTaskTitle: str(c, "a title\nover two lines"),
			ledger.MetaTaskVerdict: str(b, fuzzVerdicts[int(c)%len(fuzzVerdicts)]), ledger.MetaTaskFinal: rtfs.Bool(c&1 == 1),
			ledger.MetaTaskWhy: str(a, "why"), ledger.MetaTaskCommit: str(c, "abc"), "iteration": rtfs.Int(int64(c)),
			"condition": str(a, "done"), "reason": str(b, "held")}
		types := []ledger.ActionType{ledger.BatchStarted, ledger.TaskStarted, ledger.TaskEnded, ledger.TaskMerged, ledger.RunStarted,
			ledger.IterationStarted, ledger.CapabilityCall, ledger.StopConditionsEvaluated, ledger.RunCompleted, ledger.RunFailed}
		typ := types[int(op)%len(types)]
		id := fixtureBatch
		if int(op)%len(types) >= 4 || op&0x80 != 0 {
			id = run(b)
		}
		acts = append(acts, ledger.Action{Type: typ, RunID: id, Timestamp: at, Seq: uint64(len(acts) + 1), Cost: float64(c) / 100, Metadata: md})
	}
	acts[0].Seq = 1
	return acts
}

// Whatever a batch's chain says, the batch view takes it without a panic,
// every task stands somewhere the view can name, and the screen keeps its
// size.
func FuzzBatchView(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 4, 0, 0, 1, 8, 0, 0, 2, 3, 0, 0, 3, 2, 0, 0, 1})
	f.Add([]byte{1, 0, 1, 0, 1, 1, 2, 1, 2, 0, 1, 4, 2, 1, 2, 5, 0, 0, 0, 0, 2, 2, 3, 9})
	f.Add([]byte{0x81, 0x82, 0x83, 0x84, 9, 1, 1, 1, 7, 1, 1, 1})
	known := map[string]bool{taskRunning: true, taskMerging: true, taskBack: true, "": true}
	for _, v := range fuzzVerdicts {
		known[v] = true
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		acts := fuzzActions(data)
		m := newModel(&Options{RunID: fixtureBatch, Now: batchNow}, testStyles())
		m.update(sizeMsg(80, 24))
		evs := make([]loop.Event, len(acts))
		for i := range acts {
			evs[i] = loop.Event{Kind: loop.EventAction, Action: &acts[i]}
		}
		m.update(eventsMsg{events: evs})
		m.update(loadedMsg{})
		if m.batchV == nil {
			t.Fatal("no batch view")
		}
		for _, tk := range m.batchV.b.tasks {
			if s := tk.status(); !known[s] {
				t.Fatalf("task %q stands at %q", tk.id, s)
			}
		}
		for _, k := range []string{"G", "enter", "g", "down", "enter"} {
			m.update(keyMsg(k))
		}
		lines := strings.Split(m.View(), "\n")
		if len(lines) != 24 {
			t.Fatalf("%d lines", len(lines))
		}
		for _, l := range lines {
			if w := ansi.StringWidth(l); w > 80 || strings.ContainsAny(ansi.Strip(l), "\x1b\x07\n") {
				t.Fatalf("a line %d wide, or with a control character: %q", w, l)
			}
		}
	})
}
