package cli_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/e2e"
)

// addressLimitKB is the address space the bounded-evaluation tests give the
// binary (ulimit -v): an unbounded allocation fails the test with Go's
// out-of-memory error instead of taking the machine down. With a store open
// the binary reserves close to 2 GiB it never touches (Badger's maps, and
// 8 MiB of stack per thread, more threads on a loaded machine), so 4 GiB
// leaves room, while the programs tested here would need terabytes.
const addressLimitKB = 4 << 20

// limited runs the ralph binary with args under the address-space limit.
func limited(t *testing.T, e *e2e.E, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	script := "ulimit -v " + strconv.Itoa(addressLimitKB) + ` && exec "$0" "$@"`
	out, errOut, code := e.Command("bash", append([]string{"-c", script, e.Bin()}, args...)...).Run()
	if strings.Contains(errOut, "out of memory") {
		t.Fatalf("ralph %q ran out of memory under ulimit -v %d", args, addressLimitKB)
	}
	return out, errOut, code
}

const doubling = `(def v (reduce (fn [v _] (conj v v)) [] (range 40))) (def w (reduce (fn [v _] (conj v v)) [] (range 40))) `

// The programs of the bounded-evaluation issue, with the real binary under
// an address-space limit: each ends with its value or its error (exit 1)
// naming the bound and the position.
var _ = suite.Add(e2e.Test{Name: "BoundedEvaluation", Run: func(t *testing.T, e *e2e.E) {
	const fuel = "evaluation ran out of fuel (limit 10000000 steps); simplify the program or raise the fuel limit\n"
	const key = "a map key or set member must print in at most 65536 bytes; [[] [[]] [[] [[]]] [[] [[]] [[] [[]]]] [[] [[]] [[] [[]]] [[… is larger: key by something smaller, such as an id\n"
	cases := []struct {
		prog, wantOut, wantErr string
		code                   int
	}{
		{"(+ 1 v)", "", "<expr>:1:107: + expects a number, got vector [[] [[]] [[] [[]]] [[] [[]] [[] [[]]]] […\n", 1},
		{"(throw v)", "", "<expr>:1:107: thrown: [[] [[]] [[] [[]]] [[] [[]] [[] [[]]]] [[] [[]] [[] [[]]] [[] [[]] [[] [[]]]]] […\n", 1},
		{"(try (+ 1 v) (catch e :caught))", ":caught\n", "", 0},
		{"(hash-map v 1)", "", "<expr>:1:107: " + key, 1},
		{"(count (sort [v v]))", "2\n", "", 0},
		{"(count (sort [v w]))", "", "<expr>:1:114: " + fuel, 1},
		{"(= v w)", "", "<expr>:1:107: " + fuel, 1},
		{"(str v)", "", "<expr>:1:107: " + fuel, 1},
	}
	for _, tc := range cases {
		e.Run(tc.prog, func(t *testing.T, e *e2e.E) {
			t.Parallel()
			out, errOut, code := limited(t, e, "eval", "-e", doubling+tc.prog)
			if code != tc.code || out != tc.wantOut || errOut != tc.wantErr {
				t.Errorf("exit %d, stdout %q, stderr %q\nwant exit %d, %q, %q", code, out, errOut, tc.code, tc.wantOut, tc.wantErr)
			}
		})
	}
}})

// A plan step that blows a bound fails cleanly: the step closes with the
// error, the compensation of an earlier step runs, and the plan closes.
var _ = suite.Add(e2e.Test{Name: "PlanStepBlowsABound", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	plan := filepath.Join(dir, "plan.rtfs")
	writeFile(t, plan, `(do
  (step.with-compensation
    (step "Reserve" (call :kv.put {:key "r" :value 1}))
    (step "Release" (call :kv.put {:key "r" :value nil})))
  (step "Blow"
    (let [v (reduce (fn [v _] (conj v v)) [] (range 40))]
      (+ 1 v))))
`)
	_, errOut, code := limited(t, e, "exec", plan, "--store", store)
	const why = "plan.rtfs:7:7: + expects a number, got vector [[] [[]] [[] [[]]] [[] [[]] [[] [[]]]] […"
	if code != 1 || !strings.HasSuffix(strings.TrimSpace(errOut), why) {
		t.Fatalf("exec: exit %d, stderr %q; want exit 1 and %q", code, errOut, why)
	}
	tree, _, _ := e.Ralph("chain", "show", "--tree", "--store", store).Run()
	for _, want := range []string{
		"PlanStepFailed Blow FAILED (" + why + ")",
		"CompensationCompleted Release ok",
		"PlanAborted plan.rtfs FAILED (" + why + ")",
	} {
		if !strings.Contains(tree, want) {
			t.Errorf("chain lacks %q:\n%s", want, tree)
		}
	}
}})

// SIGINT during a sort of shared values that would run for hours (fuel
// unbounded for the purpose) ends ralph eval with exit 4 within a second.
var _ = suite.Add(e2e.Test{Name: "SigintDuringSort", Needs: []e2e.Need{e2e.File("/proc/self/stat")}, Run: func(t *testing.T, e *e2e.E) {
	eval := e.Ralph("eval", "--fuel", "4000000000000000000", "-e", doubling+"(count (sort [v w]))").Start()
	// Wait until the process has spent 1 s of CPU: it is inside the sort
	// (the sort runs until cancelled; a binary built with -race takes a
	// good part of a second to start).
	for cpuTicks(eval.Pid()) < 100 {
		select {
		case <-eval.Done():
			t.Fatalf("ralph ended before the signal: %v, %s", eval.Wait(), eval.Stderr())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := eval.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-eval.Done():
		err := eval.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 4 || !strings.Contains(eval.Stderr(), "evaluation cancelled") {
			t.Errorf("after SIGINT: %v, stderr %q; want exit 4 and a cancellation", err, eval.Stderr())
		}
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		eval.Kill()
		t.Fatal("ralph eval did not end after SIGINT")
	}
}})

// cpuTicks is the user+system CPU time of process pid, in clock ticks.
func cpuTicks(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0 // the process is gone: the caller sees it end
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.Atoi(f[11])
	k, _ := strconv.Atoi(f[12])
	return u + k
}
