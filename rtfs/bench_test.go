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

// benchPlanSrc is a plan using most of the compiler's forms: plan, step,
// call, let, fn, loop/recur, the fast numeric calls, cond, when, ->.
const benchPlanSrc = `(plan :name "bench" :language rtfs20 :program
  (do
    (defn sq [x] (* x x))
    (step "Gather" ^{:retries 2}
      (let [n 10
            xs (loop [i 0 acc []] (if (< i n) (recur (inc i) (conj acc (sq i))) acc))]
        (when (> (count xs) 3)
          (call :ccos.echo {:message (str "n=" n)}))
        (-> xs (nth 2) inc dec)))
    (step "Decide"
      (cond (= 1 2) :no
            (<= 2 3) (if-let [v (get {:a 1} :a)] (+ v 1) 0)
            :else :yes))))`

// BenchmarkCompile measures compiling read forms: the compiler's form
// dispatch and the fast calls it emits.
func BenchmarkCompile(b *testing.B) {
	b.Run("plan", func(b *testing.B) {
		forms, err := Read(benchPlanSrc, "bench")
		if err != nil {
			b.Fatal(err)
		}
		opts := Options{File: "bench", Mode: PlanMode}
		if _, err := Compile(forms, opts); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Compile(forms, opts); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPrint measures AppendValue on an action's arguments: a map of
// strings, keywords, numbers, a vector and a set.
func BenchmarkPrint(b *testing.B) {
	v, err := ReadValue(`{:path "/tmp/work/main.go" :mode :append :lines [1 2 3 40 500]
	  :tags #{:a :b :c} :ratio 0.25 :ok true :note nil :args ["-v" "--count" "3"] :quoted '(x y)}`)
	if err != nil {
		b.Fatal(err)
	}
	buf := AppendValue(nil, v)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendValue(buf[:0], v)
	}
}

// BenchmarkTypeOf measures parsing a capability's schema held as a value.
func BenchmarkTypeOf(b *testing.B) {
	v, err := ReadValue(`[:map [:path :string] [:mode {:optional true} [:enum :append :write]]
	  [:lines [:vector :int]] [:range [:tuple :int :int]] [:env [:map-of :string :string]]
	  [:ratio [:or :int :float]] [:note [:maybe :string]]]`)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := TypeOf(v); err != nil {
			b.Fatal(err)
		}
	}
}
