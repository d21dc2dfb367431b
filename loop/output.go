package loop

import (
	"fmt"
	"path/filepath"
	"unicode/utf8"

	"github.com/ralphloop/ralph/capability"
)

// LogsDir is the directory of a store that holds the calls' output files.
const LogsDir = "logs"

// outputFile names the file a call under step writes its whole output to:
// <LogDir>/<run-id>/<step-id>.out, named by the step's PlanStepStarted
// action, which is on the chain before the call starts; a second call in
// the same step (a retry, another agent) gets <step-id>.2.out and so on.
// ok is false when the orchestrator keeps no logs.
func (r *run) outputFile(step string) (capability.OutputFile, bool) {
	dir := r.logDir
	if dir == "" || step == "" {
		return capability.OutputFile{}, false
	}
	runID := r.in.RunID
	if runID == "" { // a plan run alone (ralph exec): its plan names it
		runID = r.planID
	}
	r.outMu.Lock()
	if r.outCalls == nil {
		r.outCalls = map[string]int{}
	}
	r.outCalls[step]++
	n := r.outCalls[step]
	r.outMu.Unlock()
	name := step + ".out"
	if n > 1 {
		name = fmt.Sprintf("%s.%d.out", step, n)
	}
	path := filepath.Join(dir, runID, name)
	rel := path // a LogDir outside the store is recorded as it is
	if sd := r.storeDir; sd != "" {
		if x, err := filepath.Rel(sd, path); err == nil && filepath.IsLocal(x) {
			rel = filepath.ToSlash(x)
		}
	}
	return capability.OutputFile{Path: path, Rel: rel, Redact: r.secrets}, true
}

// MaxStreamText bounds the text of one streamed agent event on the bus
// (a line of the UI's output pane, of the headless printer): the bus
// queues thousands of events per consumer, and the whole line is in the
// call's output file.
const MaxStreamText = 8 << 10

// streamCut is s cut to MaxStreamText bytes at a character boundary, with
// a note of how much more there is.
func streamCut(s string) string {
	if len(s) <= MaxStreamText {
		return s
	}
	cut := MaxStreamText
	for cut > MaxStreamText-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s … [%d bytes more in the call's output file]", s[:cut], len(s)-cut)
}
