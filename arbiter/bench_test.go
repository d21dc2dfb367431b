package arbiter

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/governance"
)

// benchPlan is a 20-step plan: echoes, arithmetic, kv and file steps, a
// parallel layer, and steps whose arguments are expressions.
func benchPlan() string {
	var b strings.Builder
	b.WriteString("(do\n")
	for i := range 16 {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "  (step \"Echo %d\" (call :ccos.echo {:message \"step %d\"}))\n", i, i)
		case 1:
			fmt.Fprintf(&b, "  (step \"Add %d\" (call :ccos.math.add %d 3))\n", i, i)
		case 2:
			fmt.Fprintf(&b, "  (step \"Put %d\" ^{:retry {:max 2 :backoff-ms 10}} (call :kv.put {:key \"k%d\" :value (:result ctx)}))\n", i, i)
		case 3:
			fmt.Fprintf(&b, "  (step \"Write %d\" (let [n (count (str (:result ctx)))] (call :fs.write {:path \"out/%d.txt\" :content (str n)})))\n", i, i)
		}
	}
	b.WriteString("  (step-parallel\n")
	for i := 16; i < 20; i++ {
		fmt.Fprintf(&b, "    (step \"Test %d\" (call :shell.exec {:cmd \"go\" :args [\"test\" \"./pkg%d\"] :check false}))\n", i, i)
	}
	b.WriteString("  ))\n")
	return b.String()
}

// benchIR is a 50-step IR: ten chains of five steps, declared out of order.
func benchIR() string {
	var steps []string
	for i := 49; i >= 0; i-- {
		deps := ""
		if i%5 != 0 {
			deps = fmt.Sprintf(`"s%d"`, i-1)
		}
		var c string
		switch i % 3 {
		case 0:
			c = fmt.Sprintf(`"capability": ":ccos.echo", "args": {"message": "step %d"}`, i)
		case 1:
			c = fmt.Sprintf(`"capability": ":ccos.math.add", "args": [%d, 1]`, i)
		case 2:
			c = fmt.Sprintf(`"capability": ":kv.put", "args": {"key": "k%d", "value": {"$rtfs": "(:result ctx)"}}, "options": {"retry": {"max": 1}}`, i)
		}
		steps = append(steps, fmt.Sprintf(`{"id": "s%d", "name": "Step %d", %s, "deps": [%s]}`, i, i, c, deps))
	}
	return irDoc(steps...)
}

func BenchmarkArbiter(b *testing.B) {
	b.Run("validate-plan", func(b *testing.B) {
		c := testChecker(b, governance.Constitution{ShellAllow: []string{"go"}})
		src := benchPlan()
		if _, ps := c.check(src); len(ps) > 0 {
			b.Fatalf("the benchmark plan must pass: %+v", ps)
		}
		b.ReportAllocs()
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, ps := c.check(src); len(ps) > 0 {
				b.Fatal(ps)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/20, "ns/step")
	})
	b.Run("compile-ir", func(b *testing.B) {
		reg := testRegistry(b)
		doc := []byte(benchIR())
		if _, err := CompileIR(doc, reg); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if _, err := CompileIR(doc, reg); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50, "ns/step")
	})
}
