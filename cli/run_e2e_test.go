package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/ledger"
)

var _ = suite.Add(e2e.Test{Name: "Quickstart", Run: func(t *testing.T, e *e2e.E) {
	store := filepath.Join(t.TempDir(), "store")
	out, errOut, code := e.Ralph("run", "../examples/quickstart/ralph.toml", "--store", store).Run()
	if code != 0 || !strings.Contains(out, "done after 3 iteration(s)") || !strings.Contains(out, "CompensationCompleted Release") {
		t.Fatalf("quickstart: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := e.Ralph("chain", "verify", "--store", store).Run(); code != 0 {
		t.Fatalf("verify: %d %s %s", code, out, errOut)
	}
	out, _, _ = e.Ralph("runs", "--store", store).Run()
	if !strings.Contains(out, "done") || !strings.Contains(out, "counted-to-three") {
		t.Errorf("runs:\n%s", out)
	}
}})

var _ = suite.Add(e2e.Test{Name: "RunExitCodes", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cases := []struct {
		name, toml string
		args       []string
		code       int
		stdout     string
		stderr     string
	}{
		{"max_iterations is a limit", `[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "x"}))'
[[stop]]
kind = "max_iterations"
max = 4
`, nil, 3, "stopped after 4 iteration(s)", ""},
		{"failure class", `[plan]
rtfs = '(step "Boom" (/ 1 0))'
[[stop]]
name = "broken"
kind = "consecutive_failures"
count = 2
[[stop]]
kind = "max_iterations"
max = 9
`, nil, 1, "failed after 2 iteration(s)", ""},
		{"--max-iterations", `[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "x"}))'
[[stop]]
kind = "never"
`, []string{"--max-iterations", "2"}, 3, "stopped after 2 iteration(s)", ""},
		{"bad config names the line", `[plan]
rtfs = '1'

[[stop]]
kind = "max_iteration"
`, nil, 2, "", "ralph.toml:4: [[stop]] (kind \"max_iteration\"): kind \"max_iteration\" is unknown"},
	}
	for i, tc := range cases {
		sub := filepath.Join(dir, string(rune('a'+i)))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(sub, "ralph.toml"), tc.toml)
		args := append([]string{"run", filepath.Join(sub, "ralph.toml")}, tc.args...)
		out, errOut, code := e.Ralph(args...).Run()
		if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("%s: exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", tc.name, code, tc.code, out, errOut)
		}
		if tc.name == "max_iterations is a limit" && strings.Count(out, "IterationStarted") != 4 {
			t.Errorf("ran %d iterations, want exactly 4", strings.Count(out, "IterationStarted"))
		}
	}
}})

var _ = suite.Add(e2e.Test{Name: "RunJSON", Run: func(t *testing.T, e *e2e.E) {
	store := filepath.Join(t.TempDir(), "store")
	out, errOut, code := e.Ralph("run", "../examples/quickstart/ralph.toml", "--json", "--store", store).Run()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, line)
		}
	}
	var last map[string]any
	_ = json.Unmarshal([]byte(lines[len(lines)-1]), &last)
	if last["summary"] != true || last["exit_code"] != float64(0) || last["state"] != "done" {
		t.Errorf("summary line %v", last)
	}
}})

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

const slowSaga = `[plan]
rtfs = '''
(do
  (step.with-compensation
    (step "Book" (call :kv.put {:key "booked" :value true}))
    (step "Unbook" (call :kv.put {:key "booked" :value false})))
  (step "Long" (call :shell.exec {:cmd "sleep" :args ["60"]})))
'''
[[stop]]
kind = "max_iterations"
max = 1
[governance]
shell_allow = ["sleep"]
`

var _ = suite.Add(e2e.Test{Name: "SigintRunsCompensations", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ralph.toml"), slowSaga)
	cmd := e.Ralph("run", filepath.Join(dir, "ralph.toml")).Start()
	cmd.WaitLine("PlanStepStarted Long")
	if err := cmd.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	out := cmd.Rest()
	code := exitCode(cmd.Wait())
	if code != 4 || !strings.Contains(out, "CompensationCompleted Unbook") || !strings.Contains(out, "RunAborted") {
		t.Errorf("exit %d\n%s\n%s", code, out, cmd.Stderr())
	}
}})

var _ = suite.Add(e2e.Test{Name: "ResumeAfterKill", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ralph.toml"), `[plan]
rtfs = '''
(do
  (step "Charge" ^{:idempotency {:key "charge" :scope :intent}}
    (call :kv.put {:key "charged" :value true}))
  (step "Slow"
    (if (call :kv.get {:key "slept"})
      :already
      (do (call :kv.put {:key "slept" :value true})
          (call :shell.exec {:cmd "sleep" :args ["20"]})))))
'''
[[stop]]
kind = "max_iterations"
max = 1
[governance]
shell_allow = ["sleep"]
`)
	cmd := e.Ralph("run", filepath.Join(dir, "ralph.toml")).Start()
	cmd.WaitLine("PlanStepStarted Slow")
	cmd.WaitLine("CapabilityCall kv.put") // "slept" is recorded; sleep starts next
	_ = cmd.Kill()                        // SIGKILL: no cleanup at all
	_ = cmd.Wait()
	store := filepath.Join(dir, ".ralph")
	runs, errOut, code := e.Ralph("runs", "--json", "--store", store).Run()
	if code != 0 {
		t.Fatalf("runs: %d %s", code, errOut)
	}
	if want := fmt.Sprintf("process %d, which is no longer running, left %s without closing it; it is read as it was left", cmd.Pid(), store); !strings.Contains(errOut, want) {
		t.Errorf("runs after the crash said %q, want %q", errOut, want)
	}
	if pid := ledger.StaleLock(store); pid != cmd.Pid() {
		t.Errorf("reading the store changed its lock: it names process %d, want %d", pid, cmd.Pid())
	}
	var rec struct{ ID, State string }
	if err := json.Unmarshal([]byte(strings.SplitN(runs, "\n", 2)[0]), &rec); err != nil || rec.State != "interrupted" {
		t.Fatalf("run record %q: %v", runs, err)
	}
	out, errOut, code := e.Ralph("resume", rec.ID, "--store", store).Run()
	if code != 3 || !strings.Contains(out, "CapabilityDeduplicated Charge") || !strings.Contains(out, "stopped after 1 iteration(s)") {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	if want := fmt.Sprintf("cleared a stale lock on %s left by process %d", store, cmd.Pid()); !strings.Contains(errOut, want) {
		t.Errorf("resume after the crash said %q, want %q", errOut, want)
	}
	exported, _, _ := e.Ralph("chain", "export", "--run", rec.ID, "--store", store).Run()
	if calls := strings.Count(exported, `"function_name":"kv.put","arguments":[{":key":"charged"`); calls != 1 {
		t.Errorf("the idempotent kv.put ran %d times across the crash, want 1", calls)
	}
	if _, errOut, code := e.Ralph("chain", "verify", "--store", store).Run(); code != 0 {
		t.Errorf("verify after crash and resume: %s", errOut)
	}
}})
