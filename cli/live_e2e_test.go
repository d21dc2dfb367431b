package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/serve"
)

// quickstartStore records the quickstart in a new store and returns the
// store and the run's id.
func quickstartStore(t *testing.T, e *e2e.E) (store, runID string) {
	t.Helper()
	return quickstartStoreIn(t, e, t.TempDir())
}

// quickstartStoreIn is quickstartStore in dir.
func quickstartStoreIn(t *testing.T, e *e2e.E, dir string) (store, runID string) {
	t.Helper()
	store = filepath.Join(dir, "store")
	cfg, err := filepath.Abs("../examples/quickstart/ralph.toml")
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := e.Ralph("run", cfg, "--no-tui", "--store", store).Run()
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
		append([]string{"chain", "export", "--bundle"}, s...),
		append([]string{"chain", "export", "--bundle", "--run", runID}, s...),
	}
}

// Every reading command prints the same bytes, with the same exit status,
// whether it opens the store itself or reads it through the socket of the
// process that holds it.
var _ = suite.Add(e2e.Test{Name: "ServedReadsAreIdentical", Run: func(t *testing.T, e *e2e.E) {
	store, runID := quickstartStore(t, e)
	type result struct {
		out, errOut string
		code        int
	}
	offline := map[int]result{}
	for i, args := range readingCommands(store, runID) {
		out, errOut, code := e.Ralph(args...).Run()
		offline[i] = result{out, errOut, code}
	}
	// Hold the store as a running ralph does, and serve it: with the key
	// the quickstart made, in the test's environment.
	st, err := ledger.Open(ledger.Options{Dir: store, KeyDir: filepath.Join(e.ConfigHome(), "ralph", "keys")})
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
		out, errOut, code := e.Ralph(args...).Run()
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
	_, errOut, code := e.Ralph("run", cfg, "--no-tui", "--store", store).Run()
	if code != 2 || !strings.Contains(errOut, "in use by process") {
		t.Errorf("run on a held store: exit %d %q", code, errOut)
	}
}})

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

// releasedLoop is a slow loop that runs until the test calls release (a
// file_exists condition), so a loaded machine cannot end it before the
// test has looked at it; max_iterations only bounds a test that forgets.
func releasedLoop(t *testing.T, dir string) (cfg string, release func()) {
	t.Helper()
	cfg = slowLoop(t, dir, 2000)
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("[[stop]]\nname = \"released\"\nkind = \"file_exists\"\npath = \"released\"\n"); err != nil {
		t.Fatal(err)
	}
	return cfg, func() { writeFile(t, filepath.Join(dir, "released"), "") }
}

func itoa(n int) string { return strconv.Itoa(n) }

// liveRunID waits for the run the process serving store drives, once it
// has recorded a few actions.
func liveRunID(t *testing.T, store string) string {
	t.Helper()
	return liveRunIDAt(t, store, 3)
}

// While a slow loop runs headless, every reading command works on its
// store, and the run then completes with its closing action.
var _ = suite.Add(e2e.Test{Name: "ReadingCommandsOnALiveRun", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg, release := releasedLoop(t, dir)
	store := filepath.Join(dir, "store")
	cmd := e.Ralph("run", cfg, "--no-tui", "--store", store).In(dir).Start()
	runID := liveRunID(t, store)
	want := map[string]string{"runs": runID, "history": "iteration 1", "chain show": "IterationStarted",
		"chain export": `"action_type":"RunStarted"`, "chain verify": "verified ", "predicate": "true"}
	for _, args := range readingCommands(store, runID)[:13] {
		out, errOut, code := e.Ralph(args...).Run()
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
	out, _, _ := e.Ralph("runs", "--store", store).Run()
	if !strings.Contains(out, "running") || !strings.Contains(out, "PID") || !strings.Contains(out, itoa(cmd.Pid())) {
		t.Errorf("runs on a live store does not show the live run's process:\n%s", out)
	}
	// A bundle exported while the run appends ends at a signed checkpoint
	// and verifies with no store.
	liveBundle, errOut, code := e.Ralph("chain", "export", "--bundle", "--store", store).Run()
	if code != 0 || !strings.HasPrefix(liveBundle, "ralph-bundle 1\n") {
		t.Fatalf("chain export --bundle on a live store: exit %d: %s", code, errOut)
	}
	bundleFile := filepath.Join(dir, "live.bundle")
	writeFile(t, bundleFile, liveBundle)
	if out, errOut, code := e.Ralph("chain", "verify", "--bundle", bundleFile).Run(); code != 0 || !strings.HasPrefix(out, "verified bundle "+bundleFile+": ") {
		t.Errorf("a bundle exported from a live store does not verify: exit %d %q %q", code, out, errOut)
	}
	release()
	if err := cmd.Wait(); cmd.State().ExitCode() != 0 { // the release file: a success-class stop
		t.Fatalf("the run did not complete: %v\n%s", err, cmd.Output())
	}
	out, _, _ = e.Ralph("chain", "show", "--run", runID, "--store", store).Run()
	if !strings.Contains(out, "RunStopped") && !strings.Contains(out, "RunCompleted") {
		t.Errorf("no closing action:\n%s", out)
	}
	// The live bundle is the finished store's bundle up to its head: the
	// same lines, but for its end line.
	final, _, _ := e.Ralph("chain", "export", "--bundle", "--store", store).Run()
	if body := liveBundle[:strings.LastIndex(liveBundle, "end ")]; !strings.HasPrefix(final, body) || len(final) <= len(liveBundle) {
		t.Errorf("the live bundle is not a prefix of the finished store's bundle (live %d bytes, finished %d)", len(liveBundle), len(final))
	}
	if _, err := os.Stat(filepath.Join(store, serve.SocketName)); !os.IsNotExist(err) {
		t.Errorf("the socket outlived its process: %v", err)
	}
}})

// runState reads a run's recorded state through any reader (ralph runs).
func runState(t *testing.T, e *e2e.E, store, runID string) string {
	t.Helper()
	out, _, _ := e.Ralph("runs", "--json", "--store", store).Run()
	for _, line := range strings.Split(out, "\n") {
		var r struct{ ID, State string }
		if json.Unmarshal([]byte(line), &r) == nil && r.ID == runID {
			return r.State
		}
	}
	return ""
}

// waitClosed waits for the run to end and for its process to have closed
// the store: no socket, no lock file, and the run's closing action.
func waitClosed(t *testing.T, e *e2e.E, store, runID string) {
	t.Helper()
	waitUntil(t, "run "+runID+" ends", func() bool {
		s := runState(t, e, store, runID)
		return s != "" && s != "running" && s != "paused"
	})
	waitUntil(t, "the store is closed", func() bool {
		_, sockErr := os.Stat(filepath.Join(store, serve.SocketName))
		return os.IsNotExist(sockErr) && ledger.StaleLock(store) == 0 && !lockFile(store)
	})
	out, _, _ := e.Ralph("chain", "show", "--run", runID, "--store", store).Run()
	if !regexp.MustCompile(`Run(Completed|Stopped|Failed|Aborted)`).MatchString(out) {
		t.Errorf("run %s has no closing action:\n%s", runID, out)
	}
}

// lockFile reports whether the store's lock file is there (a writer has
// it open, or one died holding it).
func lockFile(store string) bool {
	_, err := os.Stat(filepath.Join(store, "data", "LOCK"))
	return err == nil
}

var startedRe = regexp.MustCompile(`run ([0-9a-f-]{36}) started in the background \(pid (\d+)\); its output goes to (\S+)`)

// run --detach returns at once with the run id; attach shows the run live
// in a terminal, a second attach works beside it, q detaches and the run
// completes; an attach to the ended run says how to view it.
var _ = suite.Add(e2e.Test{Name: "DetachAndAttach", Needs: []e2e.Need{e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg := slowLoop(t, dir, 25)
	store := filepath.Join(dir, "store")
	out, errOut, code := e.Ralph("run", cfg, "--detach", "--store", store).Run()
	m := startedRe.FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.Contains(out, "ralph attach "+m[1]) {
		t.Fatalf("run --detach: exit %d\n%s%s", code, out, errOut)
	}
	runID, logFile := m[1], m[3]
	if logFile != filepath.Join(store, "logs", runID+".log") {
		t.Errorf("log file %s", logFile)
	}
	fi, err := os.Stat(filepath.Join(store, serve.SocketName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket: %v %v, want mode 0600", fi, err)
	}
	a := e.Ralph("attach", runID[:8], "--store", store).Term()
	waitShown(t, a, store, "Running")
	waitIteration(t, a, store, 2)
	b := e.Ralph("attach", runID, "--store", store).Term()
	waitShown(t, b, store, "Running")
	v := e.Ralph("view", runID, "--store", store).Term()
	// Read through the socket, not "Interrupted": the view is idle at the
	// run's last seq, not ended.
	if s := v.WaitIdle(1); !strings.Contains(s, "Running elsewhere") || !strings.Contains(s, "The run goes on in process "+m[2]) {
		t.Errorf("the view of a run going on elsewhere:\n%s", s)
	}
	v.Send("q")
	runs, _, _ := e.Ralph("runs", "--store", store).Run()
	if !strings.Contains(runs, "attached") || !strings.Contains(runs, m[2]) || !strings.Contains(runs, logFile) {
		t.Errorf("runs does not show the attached run's process and log:\n%s", runs)
	}
	a.Send("q")
	a.WaitFor("detached from run " + runID)
	b.Send("q")
	b.WaitFor("detached from run " + runID)
	waitClosed(t, e, store, runID)
	log, _ := os.ReadFile(logFile)
	if !strings.Contains(string(log), "RunStopped") || !strings.Contains(string(log), "run "+runID+" stopped after 25 iteration(s)") {
		t.Errorf("the log lacks the run's end:\n%s", log)
	}
	c := e.Ralph("attach", runID, "--store", store).Term()
	if code := c.Exit(); code != 2 {
		t.Fatalf("attach to an ended run: exit %d, want 2:\n%s", code, c.Screen())
	}
	if s := c.Screen(); !strings.Contains(s, "has ended (stopped)") || !strings.Contains(s, "ralph view "+runID) {
		t.Errorf("attach to an ended run:\n%s", s)
	}
}})

// The terminal of a foreground UI run closing (SIGHUP) detaches the run:
// it completes, its closing action recorded, its output in the log file.
var _ = suite.Add(e2e.Test{Name: "HangupDetachesAForegroundRun", Needs: []e2e.Need{e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg := slowLoop(t, dir, 15)
	store := filepath.Join(dir, "store")
	tm := e.Ralph("run", cfg, "--store", store).Term()
	waitIteration(t, tm, store, 2)
	runID := liveRunID(t, store)
	tm.Close()
	waitClosed(t, e, store, runID)
	if s := runState(t, e, store, runID); s != "stopped" {
		t.Errorf("run ended %s, want stopped by max_iterations", s)
	}
	log, _ := os.ReadFile(filepath.Join(store, "logs", runID+".log"))
	if !strings.Contains(string(log), "run "+runID+" stopped after 15 iteration(s)") {
		t.Errorf("the log lacks the run's end:\n%s", log)
	}
}})

// q in a foreground UI asks; n stays, d detaches and the run completes in
// the same process.
var _ = suite.Add(e2e.Test{Name: "QuitAsksInAForegroundRun", Needs: []e2e.Need{e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg := slowLoop(t, dir, 12)
	store := filepath.Join(dir, "store")
	tm := e.Ralph("run", cfg, "--store", store).Term()
	waitIteration(t, tm, store, 2)
	tm.WaitFor("y aborts the run · d detaches", "q")
	tm.Send("n")
	waitIteration(t, tm, store, 3)
	tm.Send("q")
	tm.WaitFor("d detaches")
	tm.Send("d")
	tm.WaitFor("goes on in this process")
	if code := tm.Exit(); code != 3 {
		t.Errorf("the detached run exited %d, want 3 (max_iterations)", code)
	}
	runID := regexp.MustCompile(`run ([0-9a-f-]{36}) goes on`).FindStringSubmatch(tm.Screen())
	if runID == nil {
		t.Fatalf("no run id on screen:\n%s", tm.Screen())
	}
	waitClosed(t, e, store, runID[1])
}})

// SIGPIPE, SIGTERM and SIGHUP all leave the store closed (no lock file,
// no socket); only SIGKILL leaves a lock, which the next writer clears.
var _ = suite.Add(e2e.Test{Name: "SignalsCloseTheStore", Run: func(t *testing.T, e *e2e.E) {
	for _, sig := range []string{"PIPE", "TERM", "HUP", "KILL"} {
		e.Run(sig, func(t *testing.T, e *e2e.E) {
			t.Parallel()
			dir := t.TempDir()
			cfg := slowLoop(t, dir, 8)
			store := filepath.Join(dir, "store")
			var cmd *e2e.Proc
			if sig == "PIPE" { // the reader of its output goes away
				cmd = e.Command("sh", "-c", e.Bin()+" run "+cfg+" --no-tui --store "+store+" | head -c 1 >/dev/null; sleep 120 >/dev/null 2>&1").Start()
			} else {
				cmd = e.Ralph("run", cfg, "--no-tui", "--store", store).In(dir).Start()
			}
			runID := liveRunID(t, store)
			switch sig {
			case "TERM":
				cmd.Signal(syscall.SIGTERM)
			case "HUP":
				cmd.Signal(syscall.SIGHUP)
			case "KILL":
				cmd.Kill()
				cmd.Wait()
				waitUntil(t, "the process is gone", func() bool { return ledger.StaleLock(store) != 0 })
				_, errOut, _ := e.Ralph("resume", runID, "--no-tui", "--store", store).Run()
				if !strings.Contains(errOut, "cleared a stale lock") {
					t.Errorf("resume after SIGKILL did not clear the lock: %q", errOut)
				}
			}
			waitClosed(t, e, store, runID)
			want := map[string]string{"PIPE": "stopped", "TERM": "aborted", "HUP": "stopped", "KILL": "stopped"}[sig]
			if s := runState(t, e, store, runID); s != want {
				t.Errorf("after SIG%s the run is %s, want %s", sig, s, want)
			}
		})
	}
	// A reader whose output is closed (| head) exits 141 and leaves no lock.
	dir := t.TempDir()
	cfg := slowLoop(t, dir, 60)
	writeFile(t, cfg, strings.Replace(readFile(t, cfg), `delay = "300ms"`, `delay = "0s"`, 1))
	store := filepath.Join(dir, "store")
	if _, errOut, code := e.Ralph("run", cfg, "--no-tui", "--store", store).Run(); code != 3 {
		t.Fatalf("a 60-iteration run: exit %d %s", code, errOut)
	}
	out, errOut, code := e.Command("bash", "-c", e.Bin()+" chain show --json --store "+store+" | head -c 10 >/dev/null; echo ${PIPESTATUS[0]}").Run()
	if code != 0 || strings.TrimSpace(out+errOut) != "141" || lockFile(store) || ledger.StaleLock(store) != 0 {
		t.Errorf("chain show | head: exit %d %q (want 141 and no message; lock file %v)", code, out+errOut, lockFile(store))
	}
}})

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The socket answers a malformed request with 400 and one sentence, and
// a client that stops reading its event stream does not hold the run up.
var _ = suite.Add(e2e.Test{Name: "SocketMalformedAndSlowClient", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg := slowLoop(t, dir, 10)
	store := filepath.Join(dir, "store")
	cmd := e.Ralph("run", cfg, "--no-tui", "--store", store).In(dir).Start()
	runID := liveRunID(t, store)
	sock := filepath.Join(store, serve.SocketName)
	ask := func(req string) string {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, req)
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		b, _ := io.ReadAll(c)
		return string(b)
	}
	for _, req := range []string{
		"GET /v1/actions?from=abc HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		"POST /v1/control HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\n{{{",
		"BREW /coffee HTCPCP/1.0\r\n\r\n",
	} {
		if resp := ask(req); !strings.HasPrefix(resp, "HTTP/1.1 400") {
			t.Errorf("%q got:\n%s", req, resp)
		}
	}
	// A client that asks for every event and never reads.
	slow, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	io.WriteString(slow, "GET /v1/events?from=0 HTTP/1.1\r\nHost: x\r\n\r\n")
	if err := cmd.Wait(); cmd.State().ExitCode() != 3 {
		t.Fatalf("the run did not complete: %v", err)
	}
	waitClosed(t, e, store, runID)
}})

// A run in approve mode whose terminal closed waits for its next plan;
// an attached UI answers it, and aborts the run after asking.
var _ = suite.Add(e2e.Test{Name: "AttachAnswersApprovals", Needs: []e2e.Need{e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg := slowLoop(t, dir, 5)
	store := filepath.Join(dir, "store")
	fg := e.Ralph("run", cfg, "--approve", "--store", store).Term()
	fg.WaitFor("Run the plan for iteration 1")
	runID := liveRunIDAt(t, store, 0)
	fg.Close()
	a := e.Ralph("attach", runID, "--store", store).Term()
	a.WaitFor("Run the plan for iteration 1")
	a.Send("y")
	a.WaitFor("Run the plan for iteration 2")
	a.Send("a")
	a.WaitFor("Abort the run?")
	a.Send("y")
	waitClosed(t, e, store, runID)
	if s := runState(t, e, store, runID); s != "aborted" {
		t.Errorf("run ended %s, want aborted from the attached UI", s)
	}
}})

// liveRunIDAt waits for the run the process serving store drives, once
// the chain holds more than head actions.
func liveRunIDAt(t *testing.T, store string, head uint64) string {
	t.Helper()
	var id string
	waitUntil(t, "the store is served", func() bool {
		c, err := serve.Dial(context.Background(), store)
		if err != nil {
			return false
		}
		defer c.Close()
		id = c.Info().RunID
		return id != "" && c.Info().Head > head
	})
	return id
}
