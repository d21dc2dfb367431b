package rtfs

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// logHost is a testHost that also records log lines.
type logHost struct {
	*testHost
	lines []string
}

func (h *logHost) Log(_ context.Context, req *LogRequest) error {
	h.lines = append(h.lines, req.Fn+" "+req.Pos.String()+" "+req.Text)
	h.log("log %s", req.Text)
	return nil
}

// TestIterationPassesAreSteps: in a plan, each pass of doseq, dotimes,
// for and loop whose body holds steps is a child step named
// "<form> <name>#i"; bodies without steps run as plain code.
func TestIterationPassesAreSteps(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, src, want, value string }{
		{"doseq", `(doseq [f ["a" "b"]] (step "Echo" (call :ccos.echo f)))`,
			"step doseq f#1,step Echo,call ccos.echo [\"a\"],step doseq f#2,step Echo,call ccos.echo [\"b\"]", "nil"},
		{"dotimes", `(dotimes [i 2] (step "Tick" (call :t.tick i)))`,
			"step dotimes i#1,step Tick,call t.tick [0],step dotimes i#2,step Tick,call t.tick [1]", "nil"},
		{"for", `(for [x [1 2] :when (odd? x)] (step "Sq" (call :t.sq (* x x))))`,
			"step for x#1,step Sq,call t.sq [1]", "[1]"},
		{"loop", `(loop [i 0 acc []] (if (< i 2) (recur (inc i) (conj acc (step "Do" (call :t.do i)))) acc))`,
			"step loop i#1,step Do,call t.do [0],step loop i#2,step Do,call t.do [1],step loop i#3", "[0 1]"},
		{"plain loop has no pass steps", `(step "Sum" (loop [i 0 s 0] (if (< i 3) (recur (inc i) (+ s i)) s)))`,
			"step Sum", "3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newTestHost()
			v, err := runPlan(t, h, tc.src, Nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range h.events {
				if strings.HasPrefix(ev, "step ") || strings.HasPrefix(ev, "call ") {
					got = append(got, ev)
				}
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("events\n got %s\nwant %s", strings.Join(got, ","), tc.want)
			}
			if Print(v) != tc.value {
				t.Errorf("value %s, want %s", Print(v), tc.value)
			}
		})
	}
}

func TestLogGoesToHostOrCallersLog(t *testing.T) {
	t.Parallel()
	h := &logHost{testHost: newTestHost()}
	p, err := CompileString("(step \"S\"\n  (println \"n =\" 3 [\"x\"])\n  (prn \"q\" :k)\n  (log \"done\"))", Options{File: "plan.rtfs", Mode: PlanMode})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(context.Background(), h, Nil); err != nil {
		t.Fatal(err)
	}
	want := []string{`println 2:3 n = 3 ["x"]`, `prn 3:3 "q" :k`, `log 4:3 done`}
	if strings.Join(h.lines, "|") != strings.Join(want, "|") {
		t.Errorf("log lines %q, want %q", h.lines, want)
	}
	var buf bytes.Buffer
	pure, err := CompileString(`(do (println "a" nil) (prn "b") (map log ["c"]) 7)`, Options{Log: &buf})
	if err != nil {
		t.Fatal(err)
	}
	v, err := pure.Eval(context.Background())
	if err != nil || Print(v) != "7" {
		t.Fatalf("%s %v", Print(v), err)
	}
	if buf.String() != "a nil\n\"b\"\nc\n" {
		t.Errorf("pure log %q", buf.String())
	}
	// No log given: the lines go nowhere and the program still runs.
	quiet, _ := CompileString(`(println "x")`, Options{})
	if _, err := quiet.Eval(context.Background()); err != nil {
		t.Error(err)
	}
}

func TestCCOSPlanWrapper(t *testing.T) {
	t.Parallel()
	h := newTestHost()
	v, err := runPlan(t, h, `(plan :name "greet" :language rtfs20 :body (do (step "Hi" (call :ccos.echo "hi")) :ok))`, Nil)
	if err != nil || Print(v) != ":ok" {
		t.Fatalf("%s %v", Print(v), err)
	}
	if h.events[0] != `plan {:language rtfs20 :name "greet"}` {
		t.Errorf("plan props: %s", h.events[0])
	}
	for _, bad := range []struct{ src, msg string }{
		{`(plan :name "x" :language rtfs20)`, "plan has no :program (or :body)"},
		{`(plan :program (do) :body (do))`, "plan has both :program and :body"},
	} {
		_, err := CompileString(bad.src, Options{File: "p", Mode: PlanMode})
		if err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%s: %v", bad.src, err)
		}
	}
}
