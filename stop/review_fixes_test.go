package stop

import (
	"context"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// Cases from review: each once gave a false "done" or a missed one.
func TestOutputPatternReadsOnlyWhatTheWorkPrinted(t *testing.T) {
	t.Parallel()
	c := mustCond(t, config.Stop{Kind: "output_pattern", Pattern: "<promise>DONE</promise>"})
	promise := rtfs.String("Finish by printing <promise>DONE</promise>")
	cases := []struct {
		name string
		act  ledger.Action
		met  bool
	}{
		{"the prompt read back", ledger.Action{Type: ledger.CapabilityCall, FunctionName: "fs.read", Success: true, Result: promise}, false},
		{"a failed call echoing it", ledger.Action{Type: ledger.CapabilityCall, FunctionName: "shell.exec", Success: false, Result: shellResult("<promise>DONE</promise>")}, false},
		{"the agent printing it", ledger.Action{Type: ledger.CapabilityCall, FunctionName: "shell.exec", Success: true, Result: shellResult("all good <promise>DONE</promise>")}, true},
	}
	for _, tc := range cases {
		// fs.read's spec says it echoes stored text (capability.Spec.EchoesStored)
		echoes := func(id string) bool { return id == "fs.read" }
		o := c.check.check(context.Background(), &Input{Iteration: 1, LastActions: []ledger.Action{tc.act}, EchoesStored: echoes})
		if o.met != tc.met {
			t.Errorf("%s: met = %v, want %v (%s)", tc.name, o.met, tc.met, o.reason)
		}
	}
	if _, err := New(config.Stop{Kind: "output_pattern", Pattern: "DONE|", Regex: true}); err == nil || !strings.Contains(err.Error(), "matches empty output") {
		t.Errorf("a regex matching empty output was accepted: %v", err)
	}
}

func TestCommandWithBackgroundGrandchildStillPasses(t *testing.T) {
	t.Parallel()
	needShell(t)
	c := mustCond(t, config.Stop{Kind: "command", Cmd: []string{"sh", "-c", "sleep 3 & echo ok"}, MustMatch: "ok"})
	o := c.check.check(context.Background(), &Input{Iteration: 1, Workdir: t.TempDir()})
	if !o.met {
		t.Fatalf("not met: %s (%v)", o.reason, o.err)
	}
}

func TestAuditIterationCountsNumbersNotRecords(t *testing.T) {
	t.Parallel()
	ix := NewIndex()
	for seq, n := range []int64{1, 2, 2, 3} { // iteration 2 interrupted and run again
		ix.Observe(&ledger.Action{Seq: uint64(seq + 1), ActionID: string(rune('a' + seq)), Type: ledger.IterationStarted,
			Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(n)}})
	}
	p, err := ParsePredicate("(= (audit.iteration) 3)", "t")
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Bind(ix)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Eval(context.Background()); err != nil || !ok {
		t.Errorf("audit.iteration after 1,2,2,3 is not 3: %v %v", ok, err)
	}
}

func TestCommandTruncatedOutputIsNotGreen(t *testing.T) {
	t.Parallel()
	needShell(t)
	c := mustCond(t, config.Stop{Kind: "command", MustNotMatch: "FAIL",
		Cmd: []string{"sh", "-c", "head -c 1100000 /dev/zero | tr '\\0' x; echo; echo 'FAIL: 3 tests failed'"}})
	o := c.check.check(context.Background(), &Input{Iteration: 1, Workdir: t.TempDir()})
	if o.met || !strings.Contains(o.reason, "cannot be confirmed") {
		t.Fatalf("met %v: %s", o.met, o.reason)
	}
}
