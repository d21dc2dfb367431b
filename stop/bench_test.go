package stop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/testenv"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// benchActions builds n distinct actions over 64 function names with a few
// metadata values each, the shape of a long run.
func benchActions(n int) []ledger.Action {
	fns := make([]string, 64)
	for i := range fns {
		fns[i] = fmt.Sprintf("cap.fn%02d", i)
	}
	exits := []rtfs.Value{rtfs.String("0"), rtfs.String("1"), rtfs.String("2")}
	out := make([]ledger.Action, n)
	for i := range out {
		out[i] = ledger.Action{Type: ledger.CapabilityCall, FunctionName: fns[i%len(fns)], Success: i%5 != 0,
			Result: rtfs.Int(int64(i)), Metadata: map[string]rtfs.Value{"exit": exits[i%3]}}
	}
	return out
}

// BenchmarkPredicateIndex measures one step of a watcher: observe a new
// action, then evaluate the predicate, with N actions already in the run.
// The cost must not grow with N and must not allocate.
func BenchmarkPredicateIndex(b *testing.B) {
	const src = `(and (audit.succeeded? "cap.fn07")
	                  (audit.metadata? "cap.fn07" "exit" "0")
	                  (not (audit.failed? "cap.missing"))
	                  (> (audit.count "cap.fn07" :succeeded) 0)
	                  (audit.before? "cap.fn01" "cap.fn07"))`
	pred, err := ParsePredicateRTFS(src, "bench")
	if err != nil {
		b.Fatal(err)
	}
	fresh := benchActions(4096)
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(short(n), func(b *testing.B) {
			ix := NewIndex()
			for _, a := range benchActions(n) {
				ix.Observe(&a)
			}
			bound, err := pred.Bind(ix)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if ok, err := bound.Eval(ctx); err != nil || !ok {
				b.Fatalf("predicate = %t, %v", ok, err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ix.Observe(&fresh[i&4095])
				i++
				if _, err := bound.Eval(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func short(n int) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1_000:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return fmt.Sprint(n)
}

// sleeper waits d (or until its context ends) and is not cached.
type sleeper struct{ d time.Duration }

func (s sleeper) check(ctx context.Context, _ *Input) outcome {
	select {
	case <-time.After(s.d):
	case <-ctx.Done():
	}
	return outcome{reason: "slept"}
}
func (sleeper) fingerprint(*Input, *fp) bool { return true }
func (sleeper) inputs(*Input) string         { return "" }

func BenchmarkEvaluator(b *testing.B) {
	ctx := context.Background()
	b.Run("16-cached", func(b *testing.B) {
		var specs []config.Stop
		for i := range 16 {
			specs = append(specs, config.Stop{Name: fmt.Sprintf("c%d", i), Kind: []string{"max_iterations", "max_cost", "max_tokens", "never"}[i%4],
				Max: 100, USD: 5, Tokens: 1000})
		}
		conds, err := FromConfig(specs, "bench")
		if err != nil {
			b.Fatal(err)
		}
		e := NewEvaluator(conds, Options{EventBuffer: 1})
		in := Input{Iteration: 3, CostUSD: 1, Tokens: 10}
		e.Evaluate(ctx, in)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.Evaluate(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, mode := range []struct {
		name       string
		sequential bool
	}{{"parallel-4x100ms", false}, {"sequential-4x100ms", true}} {
		b.Run(mode.name, func(b *testing.B) {
			var conds []*Condition
			for i := range 4 {
				conds = append(conds, &Condition{Name: fmt.Sprintf("s%d", i), Kind: "sleep", Class: ClassSuccess, check: sleeper{100 * time.Millisecond}})
			}
			e := NewEvaluator(conds, Options{Sequential: mode.sequential, NoCache: true, EventBuffer: 1})
			for b.Loop() {
				if _, err := e.Evaluate(ctx, Input{Iteration: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCommand is the cost of one real command condition (fork/exec).
func BenchmarkCommand(b *testing.B) {
	testenv.Tool(b, "true")
	c, err := New(config.Stop{Kind: "command", Cmd: []string{"true"}})
	if err != nil {
		b.Fatal(err)
	}
	in := &Input{Workdir: b.TempDir()}
	for b.Loop() {
		if o := c.check.check(context.Background(), in); !o.met {
			b.Fatal(o.reason)
		}
	}
}
