package cli_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/serve"
)

// quickstartStore records the quickstart in a new store and returns the
// store and the run's id.
func quickstartStore(t *testing.T) (store, runID string) {
	t.Helper()
	store = filepath.Join(t.TempDir(), "store")
	cfg, err := filepath.Abs("../examples/quickstart/ralph.toml")
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runBinary(t, ralphBin, "", "run", cfg, "--no-tui", "--store", store)
	if code != 0 {
		t.Fatalf("quickstart: exit %d\n%s%s", code, out, errOut)
	}
	m := regexp.MustCompile(`run ([0-9a-f-]{36}) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no run id in:\n%s", out)
	}
	return store, m[1]
}

// readingCommands are every reading command, as args after the binary.
func readingCommands(store, runID string) [][]string {
	s := []string{"--store", store}
	return [][]string{
		append([]string{"runs"}, s...),
		append([]string{"runs", "--json"}, s...),
		append([]string{"history", runID}, s...),
		append([]string{"history", runID, "--json"}, s...),
		append([]string{"history", runID, "--verbose"}, s...),
		append([]string{"chain", "show"}, s...),
		append([]string{"chain", "show", "--json"}, s...),
		append([]string{"chain", "show", "--tree"}, s...),
		append([]string{"chain", "show", "--run", runID, "--tree"}, s...),
		append([]string{"chain", "export"}, s...),
		append([]string{"chain", "export", "--run", runID}, s...),
		append([]string{"chain", "verify"}, s...),
		append([]string{"predicate", runID, `(>= (audit.count "Count" :succeeded) 3)`}, s...),
		append([]string{"predicate", runID, `{"action_failed": {"function_name": "Check"}}`, "--json"}, s...),
		append([]string{"chain", "key"}, s...),
		append([]string{"chain", "checkpoint"}, s...),
		append([]string{"chain", "prove", "3"}, s...),
		append([]string{"chain", "prove", "100000"}, s...),
		append([]string{"history", "no-such-run"}, s...),
	}
}

// Every reading command prints the same bytes, with the same exit status,
// whether it opens the store itself or reads it through the socket of the
// process that holds it.
func TestE2EServedReadsAreIdentical(t *testing.T) {
	if ralphBin == "" {
		t.Skip("end-to-end tests build the binary; skipped under -short")
	}
	t.Parallel()
	store, runID := quickstartStore(t)
	type result struct {
		out, errOut string
		code        int
	}
	offline := map[int]result{}
	for i, args := range readingCommands(store, runID) {
		out, errOut, code := runBinary(t, ralphBin, "", args...)
		offline[i] = result{out, errOut, code}
	}
	// Hold the store as a running ralph does, and serve it.
	st, err := ledger.Open(ledger.Options{Dir: store})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := serve.Start(serve.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for i, args := range readingCommands(store, runID) {
		out, errOut, code := runBinary(t, ralphBin, "", args...)
		want := offline[i]
		if out != want.out || code != want.code || errOut != want.errOut {
			t.Errorf("ralph %s: served output differs from offline:\nexit %d (offline %d)\nstdout:\n%s\noffline stdout:\n%s\nstderr %q (offline %q)",
				strings.Join(args, " "), code, want.code, out, want.out, errOut, want.errOut)
		}
		if i < 3 && (code != 0 || out == "") {
			t.Errorf("ralph %s: exit %d, no output", strings.Join(args, " "), code)
		}
	}
	// A command that writes says who holds the store and what to do.
	cfg, _ := filepath.Abs("../examples/quickstart/ralph.toml")
	_, errOut, code := runBinary(t, ralphBin, "", "run", cfg, "--no-tui", "--store", store)
	if code != 2 || !strings.Contains(errOut, "in use by process") {
		t.Errorf("run on a held store: exit %d %q", code, errOut)
	}
}

// slowLoop writes a config whose iterations are a second apart, up to max.
func slowLoop(t *testing.T, dir string, max int) string {
	t.Helper()
	cfg := filepath.Join(dir, "ralph.toml")
	writeFile(t, cfg, `[intent]
goal = "Loop slowly"
[model]
provider = "static"
[plan]
rtfs = '(do (step "Greet" (call :ccos.echo {:message "hi"})))'
[loop]
delay = "300ms"
[[stop]]
name = "enough"
kind = "max_iterations"
max = `+itoa(max)+`
[governance]
allow = ["ccos.*"]
`)
	return cfg
}

func itoa(n int) string { return strconv.Itoa(n) }

// startRalph starts the binary in the background with output to files and
// returns it; the test ends it if it is still running.
func startRalph(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(ralphBin, args...)
	cmd.Dir = dir
	out, err := os.Create(filepath.Join(dir, "ralph.out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

// waitUntil polls cond (bounded; not a timing assertion).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened", what)
		}
	}
}

// liveRunID waits for the run the process serving store drives.
func liveRunID(t *testing.T, store string) string {
	t.Helper()
	var id string
	waitUntil(t, "the store is served", func() bool {
		c, err := serve.Dial(context.Background(), store)
		if err != nil {
			return false
		}
		defer c.Close()
		id = c.Info().RunID
		return id != "" && c.Info().Head > 3
	})
	return id
}

// While a slow loop runs headless, every reading command works on its
// store, and the run then completes with its closing action.
func TestE2EReadingCommandsOnALiveRun(t *testing.T) {
	if ralphBin == "" {
		t.Skip("end-to-end tests build the binary; skipped under -short")
	}
	t.Parallel()
	dir := t.TempDir()
	cfg := slowLoop(t, dir, 12)
	store := filepath.Join(dir, "store")
	cmd := startRalph(t, dir, "run", cfg, "--no-tui", "--store", store)
	runID := liveRunID(t, store)
	want := map[string]string{"runs": runID, "history": "iteration 1", "chain show": "IterationStarted",
		"chain export": `"action_type":"RunStarted"`, "chain verify": "verified ", "predicate": "true"}
	for _, args := range readingCommands(store, runID)[:13] {
		out, errOut, code := runBinary(t, ralphBin, "", args...)
		if args[0] == "predicate" && code == 1 {
			code = 0 // a predicate that does not hold yet is an answer
		}
		if code != 0 {
			t.Errorf("ralph %s on a live store: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
		for k, w := range want {
			if strings.HasPrefix(strings.Join(args, " "), k) && !strings.Contains(out, w) && !(k == "predicate") {
				t.Errorf("ralph %s on a live store lacks %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
	}
	out, _, _ := runBinary(t, ralphBin, "", "runs", "--store", store)
	if !strings.Contains(out, "running") || !strings.Contains(out, "PID") || !strings.Contains(out, itoa(cmd.Process.Pid)) {
		t.Errorf("runs on a live store does not show the live run's process:\n%s", out)
	}
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != 3 { // max_iterations: a limit-class stop
		b, _ := os.ReadFile(filepath.Join(dir, "ralph.out"))
		t.Fatalf("the run did not complete: %v\n%s", err, b)
	}
	out, _, _ = runBinary(t, ralphBin, "", "chain", "show", "--run", runID, "--store", store)
	if !strings.Contains(out, "RunStopped") && !strings.Contains(out, "RunCompleted") {
		t.Errorf("no closing action:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(store, serve.SocketName)); !os.IsNotExist(err) {
		t.Errorf("the socket outlived its process: %v", err)
	}
}
