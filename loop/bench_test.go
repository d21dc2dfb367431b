package loop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

const threeEcho = `(do
  (step "One" (call :ccos.echo {:message "one"}))
  (step "Two" (call :ccos.echo {:message "two"}))
  (step "Three" (call :ccos.echo {:message "three"})))`

// BenchmarkOrchestrator runs a three-step plan end to end on an in-memory,
// non-durable ledger. It reports the time per step and, measured in the
// same run, the time of appending the same actions straight to a ledger:
// x-ledger is the ratio of the two (target ≤ 3).
func BenchmarkOrchestrator(b *testing.B) {
	b.Run("three-echo-steps", func(b *testing.B) {
		fx := newFixture(b, governance.Constitution{}, nil, nil)
		ctx := context.Background()
		in := PlanInput{File: "bench.rtfs", Source: threeEcho, RunID: "bench", Ctx: rtfs.Nil}
		res, err := fx.orch.Execute(ctx, in)
		if err != nil || res.Err != nil {
			b.Fatal(err, res.Err)
		}
		acts, _ := fx.store.ByPlan(res.PlanID)
		perPlan := len(acts)
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for b.Loop() {
			if _, err := fx.orch.Execute(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
		planTime := time.Since(start)
		b.StopTimer()
		// Baseline: the same number of appends of the same actions.
		store, err := ledger.Open(ledger.Options{InMemory: true})
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		appendStart := time.Now()
		for range b.N {
			for _, a := range acts {
				c := a
				c.ActionID = NewID()
				if _, err := store.Append(ctx, &c); err != nil {
					b.Fatal(err)
				}
			}
		}
		appendTime := time.Since(appendStart)
		b.ReportMetric(float64(planTime.Nanoseconds())/float64(b.N*3), "ns/step")
		b.ReportMetric(float64(appendTime.Nanoseconds())/float64(b.N*perPlan), "ns/append")
		b.ReportMetric(float64(perPlan), "actions/plan")
		b.ReportMetric(float64(planTime)/float64(appendTime), "x-ledger")
	})
}

// BenchmarkLoop runs quickstart-like iterations on an in-memory, non-durable
// store and reports the loop's overhead per iteration beside the ledger
// appends the iteration makes (measured in the same run).
func BenchmarkLoop(b *testing.B) {
	b.Run("quickstart-iteration", func(b *testing.B) {
		toml := `
[plan]
rtfs = '''
(do
  (step "Greet" (call :ccos.echo {:message (str "hello " (:iteration ctx))}))
  (step "Count" (call :kv.put {:key "n" :value (:iteration ctx)}))
  (step.with-compensation
    (step "Reserve" (call :kv.put {:key "r" :value 1}))
    (step "Release" (call :kv.put {:key "r" :value nil}))))
'''
[[stop]]
kind = "max_iterations"
max = ` + fmt.Sprint(b.N) + `
`
		r, fx := newRunner(b, toml, nil)
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		out, err := r.Run(context.Background())
		loopTime := time.Since(start)
		b.StopTimer()
		if err != nil || out.Iterations != b.N {
			b.Fatal(err, out)
		}
		acts, _ := fx.store.ByRun(out.RunID)
		perIter := float64(len(acts)) / float64(b.N)
		store, err := ledger.Open(ledger.Options{InMemory: true})
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		appendStart := time.Now()
		for _, a := range acts {
			c := a
			c.ActionID = NewID()
			if _, err := store.Append(context.Background(), &c); err != nil {
				b.Fatal(err)
			}
		}
		appendTime := time.Since(appendStart)
		b.ReportMetric(perIter, "actions/iter")
		b.ReportMetric(float64(appendTime.Nanoseconds())/float64(b.N), "append-ns/iter")
		b.ReportMetric(float64(loopTime)/float64(appendTime), "x-ledger")
	})
}
