package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/ledger"
)

func TestE2EQuickstart(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	store := filepath.Join(t.TempDir(), "store")
	out, errOut, code := runBinary(t, ralphBin, "", "run", "../examples/quickstart/ralph.toml", "--store", store)
	if code != 0 || !strings.Contains(out, "done after 3 iteration(s)") || !strings.Contains(out, "CompensationCompleted Release") {
		t.Fatalf("quickstart: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := runBinary(t, ralphBin, "", "chain", "verify", "--store", store); code != 0 {
		t.Fatalf("verify: %d %s %s", code, out, errOut)
	}
	out, _, _ = runBinary(t, ralphBin, "", "runs", "--store", store)
	if !strings.Contains(out, "done") || !strings.Contains(out, "counted-to-three") {
		t.Errorf("runs:\n%s", out)
	}
}

func TestE2ERunExitCodes(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
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
		out, errOut, code := runBinary(t, ralphBin, "", args...)
		if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("%s: exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", tc.name, code, tc.code, out, errOut)
		}
		if tc.name == "max_iterations is a limit" && strings.Count(out, "IterationStarted") != 4 {
			t.Errorf("ran %d iterations, want exactly 4", strings.Count(out, "IterationStarted"))
		}
	}
}

func TestE2ERunJSON(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	store := filepath.Join(t.TempDir(), "store")
	out, errOut, code := runBinary(t, ralphBin, "", "run", "../examples/quickstart/ralph.toml", "--json", "--store", store)
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
}

// startRun starts `ralph run` and returns its stdout lines as they come.
func startRun(t *testing.T, args ...string) (*exec.Cmd, <-chan string, *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard only
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, ralphBin, args...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, lines, &errOut
}

// waitLine reads lines until one contains want; it returns what it read.
func waitLine(t *testing.T, lines <-chan string, want string) string {
	t.Helper()
	var seen strings.Builder
	for l := range lines {
		seen.WriteString(l + "\n")
		if strings.Contains(l, want) {
			return seen.String()
		}
	}
	t.Fatalf("output ended without %q:\n%s", want, seen.String())
	return ""
}

func rest(lines <-chan string) string {
	var b strings.Builder
	for l := range lines {
		b.WriteString(l + "\n")
	}
	return b.String()
}

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

func TestE2ESigintRunsCompensations(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ralph.toml"), slowSaga)
	cmd, lines, errOut := startRun(t, "run", filepath.Join(dir, "ralph.toml"))
	waitLine(t, lines, "PlanStepStarted Long")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	out := rest(lines)
	code := exitCode(cmd.Wait())
	if code != 4 || !strings.Contains(out, "CompensationCompleted Unbook") || !strings.Contains(out, "RunAborted") {
		t.Errorf("exit %d\n%s\n%s", code, out, errOut.String())
	}
}

func TestE2EResumeAfterKill(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
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
	cmd, lines, _ := startRun(t, "run", filepath.Join(dir, "ralph.toml"))
	waitLine(t, lines, "PlanStepStarted Slow")
	waitLine(t, lines, "CapabilityCall kv.put") // "slept" is recorded; sleep starts next
	_ = cmd.Process.Kill()                      // SIGKILL: no cleanup at all
	_ = cmd.Wait()
	store := filepath.Join(dir, ".ralph")
	runs, errOut, code := runBinary(t, ralphBin, "", "runs", "--json", "--store", store)
	if code != 0 {
		t.Fatalf("runs: %d %s", code, errOut)
	}
	if want := fmt.Sprintf("process %d, which is no longer running, left %s without closing it; it is read as it was left", cmd.Process.Pid, store); !strings.Contains(errOut, want) {
		t.Errorf("runs after the crash said %q, want %q", errOut, want)
	}
	if pid := ledger.StaleLock(store); pid != cmd.Process.Pid {
		t.Errorf("reading the store changed its lock: it names process %d, want %d", pid, cmd.Process.Pid)
	}
	var rec struct{ ID, State string }
	if err := json.Unmarshal([]byte(strings.SplitN(runs, "\n", 2)[0]), &rec); err != nil || rec.State != "interrupted" {
		t.Fatalf("run record %q: %v", runs, err)
	}
	out, errOut, code := runBinary(t, ralphBin, "", "resume", rec.ID, "--store", store)
	if code != 3 || !strings.Contains(out, "CapabilityDeduplicated Charge") || !strings.Contains(out, "stopped after 1 iteration(s)") {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	if want := fmt.Sprintf("cleared a stale lock on %s left by process %d", store, cmd.Process.Pid); !strings.Contains(errOut, want) {
		t.Errorf("resume after the crash said %q, want %q", errOut, want)
	}
	exported, _, _ := runBinary(t, ralphBin, "", "chain", "export", "--run", rec.ID, "--store", store)
	if calls := strings.Count(exported, `"function_name":"kv.put","arguments":[{":key":"charged"`); calls != 1 {
		t.Errorf("the idempotent kv.put ran %d times across the crash, want 1", calls)
	}
	if _, errOut, code := runBinary(t, ralphBin, "", "chain", "verify", "--store", store); code != 0 {
		t.Errorf("verify after crash and resume: %s", errOut)
	}
}
