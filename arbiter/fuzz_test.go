package arbiter

import (
	"strings"
	"testing"

	"github.com/ralphloop/ralph/rtfs"
)

// FuzzIR feeds arbitrary bytes to the JSON IR path: decode, validate,
// compile, canonicalise. It must never panic; whatever compiles must read
// back, canonicalise to IR with no diff against the model's, and compile
// the same way twice.
func FuzzIR(f *testing.F) {
	for _, seed := range []string{
		validIR,
		irDoc(`{"id": "a", "capability": ":ccos.echo", "args": ["x"]}`),
		irDoc(`{"id": "a", "name": "A", "capability": ":ccos.echo", "args": {"message": "x"}, "deps": ["b"]}`, `{"id": "b", "capability": ":ccos.echo", "args": {"message": "y"}, "deps": ["a"]}`),
		irDoc(`{"id": "a", "capability": ":shell.exec", "args": {"cmd": "go", "env": {"A": "b"}, "args": ["t"]}, "options": {"retry": {"max": 1, "backoff_ms": 5}, "timeout_ms": 9, "contracts": {"pre": "(fn [c] true)"}, "idempotency": {"key": "k"}, "meta": {"x": [1]}}}`),
		irDoc(`{"id": "a", "capability": ":kv.put", "args": {"key": "k", "value": {"$rtfs": "{\"a\" 1}"}}}`),
		irDoc(`{"id": "a", "capability": ":ccos.math.add", "args": [1.5, -2e3]}`),
		`{"steps": []}`, `{"steps": [1]}`, `[]`, `{`, `{"steps": [{"id": "a", "deps": [{}]}]}`, "",
	} {
		f.Add([]byte(seed))
	}
	reg := testRegistry(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		steps, ds := decodeIR(data)
		if len(ds) > 0 {
			if len(hints(ds)) > maxHints {
				t.Fatal("hints over the limit")
			}
			return
		}
		checked, ls, ds := validateIR(steps, reg, nil)
		if len(ds) > 0 {
			if len(hints(ds)) > maxHints {
				t.Fatal("hints over the limit")
			}
			return
		}
		seen := 0
		for _, l := range ls {
			seen += len(l)
			for _, i := range l {
				for _, d := range checked[i].depIdx {
					if layerOf(ls, d) >= layerOf(ls, i) {
						t.Fatalf("step %q runs no later than its dependency %q", checked[i].id, checked[d].id)
					}
				}
			}
		}
		if seen != len(checked) {
			t.Fatalf("layers hold %d of %d steps", seen, len(checked))
		}
		src := FormatPlan([]*rtfs.Node{compileSteps(checked, ls)})
		forms, err := rtfs.Read(src, "compiled")
		if err != nil {
			if strings.Contains(err.Error(), "deeper than") || strings.Contains(err.Error(), "longer than") {
				return // a literal beyond the reader's limits is refused there
			}
			t.Fatalf("compiled plan does not read: %v\n%s", err, src)
		}
		if d := DiffIR(modelIR(checked), Canonicalize(forms), reg); d != "" {
			t.Fatalf("compiled plan differs from its IR:\n%s\n%s", d, src)
		}
		again, err := CompileIR(data, reg)
		if err != nil || again != src {
			t.Fatalf("compiling twice: %v\n%s\n%s", err, again, src)
		}
	})
}

func layerOf(ls [][]int, i int) int {
	for n, l := range ls {
		for _, j := range l {
			if j == i {
				return n
			}
		}
	}
	return -1
}

// FuzzExtract: extraction and the Mode A checks never panic and keep
// their hints bounded.
func FuzzExtract(f *testing.F) {
	for _, s := range malformed() {
		if len(s) < 4096 {
			f.Add(s)
		}
	}
	f.Add(validPlan)
	reg := testRegistry(f)
	p := NewPipeline(script(), PipelineOptions{Registry: reg}).(*pipeline)
	f.Fuzz(func(t *testing.T, answer string) {
		for _, out := range []outcome{p.checkRTFS(answer), p.checkIR(answer)} {
			if len(out.diags) == 0 && out.src == "" {
				t.Fatal("neither a plan nor a diagnostic")
			}
			if len(hints(out.diags)) > maxHints {
				t.Fatal("hints over the limit")
			}
		}
	})
}
