package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/serve"
)

// quickstartStore records the quickstart in a new store and returns the
// store and the run's id.
func quickstartStore(t *testing.T) (store, runID string) {
	t.Helper()
	return quickstartStoreIn(t, t.TempDir())
}

// quickstartStoreIn is quickstartStore in dir.
func quickstartStoreIn(t *testing.T, dir string) (store, runID string) {
	t.Helper()
	store = filepath.Join(dir, "store")
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
		append([]string{"chain", "export", "--bundle"}, s...),
		append([]string{"chain", "export", "--bundle", "--run", runID}, s...),
	}
}

// Every reading command prints the same bytes, with the same exit status,
// whether it opens the store itself or reads it through the socket of the
// process that holds it.
func TestE2EServedReadsAreIdentical(t *testing.T) {
	skipWithoutBinary(t)
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
func TestE2EReadingCommandsOnALiveRun(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	dir := t.TempDir()
	cfg, release := releasedLoop(t, dir)
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
	// A bundle exported while the run appends ends at a signed checkpoint
	// and verifies with no store.
	liveBundle, errOut, code := runBinary(t, ralphBin, "", "chain", "export", "--bundle", "--store", store)
	if code != 0 || !strings.HasPrefix(liveBundle, "ralph-bundle 1\n") {
		t.Fatalf("chain export --bundle on a live store: exit %d: %s", code, errOut)
	}
	bundleFile := filepath.Join(dir, "live.bundle")
	writeFile(t, bundleFile, liveBundle)
	if out, errOut, code := runBinary(t, ralphBin, "", "chain", "verify", "--bundle", bundleFile); code != 0 || !strings.HasPrefix(out, "verified bundle "+bundleFile+": ") {
		t.Errorf("a bundle exported from a live store does not verify: exit %d %q %q", code, out, errOut)
	}
	release()
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != 0 { // the release file: a success-class stop
		b, _ := os.ReadFile(filepath.Join(dir, "ralph.out"))
		t.Fatalf("the run did not complete: %v\n%s", err, b)
	}
	out, _, _ = runBinary(t, ralphBin, "", "chain", "show", "--run", runID, "--store", store)
	if !strings.Contains(out, "RunStopped") && !strings.Contains(out, "RunCompleted") {
		t.Errorf("no closing action:\n%s", out)
	}
	// The live bundle is the finished store's bundle up to its head: the
	// same lines, but for its end line.
	final, _, _ := runBinary(t, ralphBin, "", "chain", "export", "--bundle", "--store", store)
	if body := liveBundle[:strings.LastIndex(liveBundle, "end ")]; !strings.HasPrefix(final, body) || len(final) <= len(liveBundle) {
		t.Errorf("the live bundle is not a prefix of the finished store's bundle (live %d bytes, finished %d)", len(liveBundle), len(final))
	}
	if _, err := os.Stat(filepath.Join(store, serve.SocketName)); !os.IsNotExist(err) {
		t.Errorf("the socket outlived its process: %v", err)
	}
}

// runState reads a run's recorded state through any reader (ralph runs).
func runState(t *testing.T, store, runID string) string {
	t.Helper()
	out, _, _ := runBinary(t, ralphBin, "", "runs", "--json", "--store", store)
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
func waitClosed(t *testing.T, store, runID string) {
	t.Helper()
	waitUntil(t, "run "+runID+" ends", func() bool {
		s := runState(t, store, runID)
		return s != "" && s != "running" && s != "paused"
	})
	waitUntil(t, "the store is closed", func() bool {
		_, sockErr := os.Stat(filepath.Join(store, serve.SocketName))
		return os.IsNotExist(sockErr) && ledger.StaleLock(store) == 0 && !lockFile(store)
	})
	out, _, _ := runBinary(t, ralphBin, "", "chain", "show", "--run", runID, "--store", store)
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
func TestE2EDetachAndAttach(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	dir := t.TempDir()
	cfg := slowLoop(t, dir, 25)
	store := filepath.Join(dir, "store")
	out, errOut, code := runBinary(t, ralphBin, "", "run", cfg, "--detach", "--store", store)
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
	a := newTmux(t, ralphBin+" attach "+runID[:8]+" --store "+store+"; sleep 60")
	a.waitFor("Running")
	a.waitFor("Iteration 2")
	b := newTmuxNamed(t, "second", ralphBin+" attach "+runID+" --store "+store+"; sleep 60")
	b.waitFor("Running")
	v := newTmuxNamed(t, "view", ralphBin+" view "+runID+" --store "+store+"; sleep 60")
	// Read through the socket, not "Interrupted": the view is idle at the
	// run's last seq, not ended.
	if s := v.waitIdle(1); !strings.Contains(s, "Running elsewhere") || !strings.Contains(s, "The run goes on in process "+m[2]) {
		t.Errorf("the view of a run going on elsewhere:\n%s", s)
	}
	v.send("q")
	runs, _, _ := runBinary(t, ralphBin, "", "runs", "--store", store)
	if !strings.Contains(runs, "attached") || !strings.Contains(runs, m[2]) || !strings.Contains(runs, logFile) {
		t.Errorf("runs does not show the attached run's process and log:\n%s", runs)
	}
	a.send("q")
	a.waitFor("detached from run " + runID)
	b.send("q")
	b.waitFor("detached from run " + runID)
	waitClosed(t, store, runID)
	log, _ := os.ReadFile(logFile)
	if !strings.Contains(string(log), "RunStopped") || !strings.Contains(string(log), "run "+runID+" stopped after 25 iteration(s)") {
		t.Errorf("the log lacks the run's end:\n%s", log)
	}
	c := newTmuxNamed(t, "ended", ralphBin+" attach "+runID+" --store "+store+"; echo EXIT $?; sleep 60")
	c.waitFor("EXIT 2")
	if s := c.screen(); !strings.Contains(s, "has ended (stopped)") || !strings.Contains(s, "ralph view "+runID) {
		t.Errorf("attach to an ended run:\n%s", s)
	}
}

// The terminal of a foreground UI run closing (SIGHUP) detaches the run:
// it completes, its closing action recorded, its output in the log file.
func TestE2EHangupDetachesAForegroundRun(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	dir := t.TempDir()
	cfg := slowLoop(t, dir, 15)
	store := filepath.Join(dir, "store")
	tm := newTmux(t, ralphBin+" run "+cfg+" --store "+store)
	tm.waitFor("Iteration 2")
	runID := liveRunID(t, store)
	if err := exec.Command("tmux", "kill-session", "-t", tm.session).Run(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, store, runID)
	if s := runState(t, store, runID); s != "stopped" {
		t.Errorf("run ended %s, want stopped by max_iterations", s)
	}
	log, _ := os.ReadFile(filepath.Join(store, "logs", runID+".log"))
	if !strings.Contains(string(log), "run "+runID+" stopped after 15 iteration(s)") {
		t.Errorf("the log lacks the run's end:\n%s", log)
	}
}

// q in a foreground UI asks; n stays, d detaches and the run completes in
// the same process.
func TestE2EQuitAsksInAForegroundRun(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	dir := t.TempDir()
	cfg := slowLoop(t, dir, 12)
	store, exitFile := filepath.Join(dir, "store"), filepath.Join(dir, "exit")
	tm := newTmux(t, ralphBin+" run "+cfg+" --store "+store+"; echo $? > "+exitFile+"; sleep 60")
	tm.waitFor("Iteration 2")
	tm.waitFor("y aborts the run · d detaches", "q")
	tm.send("n")
	tm.waitFor("Iteration 3")
	tm.send("q")
	tm.waitFor("d detaches")
	tm.send("d")
	tm.waitFor("goes on in this process")
	if code := waitFile(t, exitFile); code != "3" {
		t.Errorf("the detached run exited %s, want 3 (max_iterations)", code)
	}
	runID := regexp.MustCompile(`run ([0-9a-f-]{36}) goes on`).FindStringSubmatch(tm.screen())
	if runID == nil {
		t.Fatalf("no run id on screen:\n%s", tm.screen())
	}
	waitClosed(t, store, runID[1])
}

// SIGPIPE, SIGTERM and SIGHUP all leave the store closed (no lock file,
// no socket); only SIGKILL leaves a lock, which the next writer clears.
func TestE2ESignalsCloseTheStore(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	for _, sig := range []string{"PIPE", "TERM", "HUP", "KILL"} {
		t.Run(sig, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := slowLoop(t, dir, 8)
			store := filepath.Join(dir, "store")
			var cmd *exec.Cmd
			if sig == "PIPE" { // the reader of its output goes away
				cmd = exec.Command("sh", "-c", ralphBin+" run "+cfg+" --no-tui --store "+store+" | head -c 1 >/dev/null; sleep 120")
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			} else {
				cmd = startRalph(t, dir, "run", cfg, "--no-tui", "--store", store)
			}
			runID := liveRunID(t, store)
			switch sig {
			case "TERM":
				cmd.Process.Signal(syscall.SIGTERM)
			case "HUP":
				cmd.Process.Signal(syscall.SIGHUP)
			case "KILL":
				cmd.Process.Kill()
				cmd.Wait()
				waitUntil(t, "the process is gone", func() bool { return ledger.StaleLock(store) != 0 })
				_, errOut, _ := runBinary(t, ralphBin, "", "resume", runID, "--no-tui", "--store", store)
				if !strings.Contains(errOut, "cleared a stale lock") {
					t.Errorf("resume after SIGKILL did not clear the lock: %q", errOut)
				}
			}
			waitClosed(t, store, runID)
			want := map[string]string{"PIPE": "stopped", "TERM": "aborted", "HUP": "stopped", "KILL": "stopped"}[sig]
			if s := runState(t, store, runID); s != want {
				t.Errorf("after SIG%s the run is %s, want %s", sig, s, want)
			}
		})
	}
	// A reader whose output is closed (| head) exits 141 and leaves no lock.
	dir := t.TempDir()
	cfg := slowLoop(t, dir, 60)
	writeFile(t, cfg, strings.Replace(readFile(t, cfg), `delay = "300ms"`, `delay = "0s"`, 1))
	store := filepath.Join(dir, "store")
	if _, errOut, code := runBinary(t, ralphBin, "", "run", cfg, "--no-tui", "--store", store); code != 3 {
		t.Fatalf("a 60-iteration run: exit %d %s", code, errOut)
	}
	out, err := exec.Command("bash", "-c", ralphBin+" chain show --json --store "+store+" | head -c 10 >/dev/null; echo ${PIPESTATUS[0]}").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "141" || lockFile(store) || ledger.StaleLock(store) != 0 {
		t.Errorf("chain show | head: %v %q (want 141 and no message; lock file %v)", err, out, lockFile(store))
	}
}

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
func TestE2ESocketMalformedAndSlowClient(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	dir := t.TempDir()
	cfg := slowLoop(t, dir, 10)
	store := filepath.Join(dir, "store")
	cmd := startRalph(t, dir, "run", cfg, "--no-tui", "--store", store)
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
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("the run did not complete: %v", err)
	}
	waitClosed(t, store, runID)
}

// A run in approve mode whose terminal closed waits for its next plan;
// an attached UI answers it, and aborts the run after asking.
func TestE2EAttachAnswersApprovals(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	dir := t.TempDir()
	cfg := slowLoop(t, dir, 5)
	store := filepath.Join(dir, "store")
	fg := newTmux(t, ralphBin+" run "+cfg+" --approve --store "+store)
	fg.waitFor("Run the plan for iteration 1")
	runID := liveRunIDAt(t, store, 0)
	if err := exec.Command("tmux", "kill-session", "-t", fg.session).Run(); err != nil {
		t.Fatal(err)
	}
	a := newTmuxNamed(t, "attach", ralphBin+" attach "+runID+" --store "+store+"; sleep 60")
	a.waitFor("Run the plan for iteration 1")
	a.send("y")
	a.waitFor("Run the plan for iteration 2")
	a.send("a")
	a.waitFor("Abort the run?")
	a.send("y")
	waitClosed(t, store, runID)
	if s := runState(t, store, runID); s != "aborted" {
		t.Errorf("run ended %s, want aborted from the attached UI", s)
	}
}

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
