package rtfs

import (
	"context"
	"testing"
)

const predicateSrc = `(and (audit.succeeded? "ccos.chat.send") (not (audit.failed? "github.create_issue")))`

func BenchmarkParse(b *testing.B) {
	b.Run("predicate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Read(predicateSrc, "p"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchEval(b *testing.B, src string, want string) {
	p, err := CompileString(src, Options{File: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	v, err := p.Eval(ctx)
	if err != nil || Print(v) != want {
		b.Fatalf("%s = %s, %v; want %s", src, Print(v), err, want)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Eval(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEval(b *testing.B) {
	b.Run("add", func(b *testing.B) { benchEval(b, "(+ 1 2)", "3") })
	b.Run("reduce-map-range", func(b *testing.B) {
		benchEval(b, "(reduce + (map inc (range 1000)))", "500500")
	})
	b.Run("fib-20", func(b *testing.B) {
		benchEval(b, "(defn fib [n] (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2))))) (fib 20)", "6765")
	})
	b.Run("let-closure", func(b *testing.B) {
		benchEval(b, "(let [x 1 f (fn [y] (+ x y))] (f 2))", "3")
	})
	b.Run("sort-10k", func(b *testing.B) {
		// 10,000 distinct ints in a scrambled order: the cost of sort's
		// comparisons, each charged and polled through the machine.
		benchEval(b, "(count (sort (map (fn [i] (mod (* i 7919) 10007)) (range 10000))))", "10000")
	})
	b.Run("loop-recur", func(b *testing.B) {
		// One evaluation runs 1,000,000 passes: ns/iter and allocs/iter
		// are per pass (allocs/op counts the whole evaluation).
		// cpu-ns/iter is the process's CPU time per pass, which a loaded
		// machine inflates less than wall time.
		const passes = 1_000_000
		cpu0, cpuOK := processCPU()
		benchEval(b, "(loop [i 0 acc 0] (if (< i 1000000) (recur (inc i) (+ acc i)) acc))", "499999500000")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/passes, "ns/iter")
		if cpu1, ok := processCPU(); ok && cpuOK {
			// benchEval runs the program once more to check its value.
			b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N+1)/passes, "cpu-ns/iter")
		}
	})
}
