package cli_test

// Never hangs, never loses work unseen (DESIGN §18): a store removed,
// replaced or turned read-only while a run writes to it ends the run as
// failed, naming what happened; a store that cannot flush is left as it
// is after a bounded close; and a signal ends ralph within 5 s in every
// phase of a run's life. Each phase logs how long ralph took to exit
// (go test -v -run NeverHangs ./cli/ shows them).

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/internal/proctest"
)

// signalBound is how long ralph may take to exit after a signal: 5 s
// (DESIGN §18). Its watchdog exits at 4.5 s; the rest is for a loaded
// machine to deliver the signal and reap the process.
const signalBound = 5 * time.Second

// exited waits for ralph (started, not yet waited for) to exit, at most
// bound after since, and returns its exit code (128+n for a signal n) and
// how long it took; a process still running then fails the test.
func exited(t *testing.T, ralph *e2e.Proc, since time.Time, bound time.Duration) (int, time.Duration) {
	t.Helper()
	select {
	case <-ralph.Done():
		took := time.Since(since)
		err := ralph.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
				return 128 + int(ws.Signal()), took
			}
		}
		return exitCode(err), took
	case <-time.After(time.Until(since.Add(bound))):
		ralph.Signal(syscall.SIGQUIT) // its goroutines, for the failure
		<-ralph.Done()
		t.Fatalf("ralph did not exit within %s", bound)
		return 0, 0
	}
}

// immutableDirs is the need of a test that makes a store unable to flush
// (immutable).
var immutableDirs = []e2e.Need{e2e.Tool("chattr"), e2e.Probe("an immutable directory (chattr +i)", func(dir string) error {
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("chattr +i %s: %v %s; a store that cannot flush needs root and an ext2/3/4 file system under $TMPDIR", dir, err, out)
	}
	return exec.Command("chattr", "-i", dir).Run()
})}

// immutable makes dir immutable (chattr +i): nothing can be created in
// it, so Badger's flush into a new table fails (and Badger retries it
// forever), while the files it has open still take writes. The test
// clears it again at the end.
func immutable(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Fatalf("chattr +i %s: %v %s", dir, err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })
}

// loopFor writes a static loop config into dir that runs iterations delay
// apart until it has run max of them.
func loopFor(t *testing.T, dir string, delay string, max int) string {
	t.Helper()
	cfg := slowLoop(t, dir, max)
	writeFile(t, cfg, strings.Replace(readFile(t, cfg), `delay = "300ms"`, `delay = "`+delay+`"`, 1))
	return cfg
}

// A store removed, replaced, or on a file system turned read-only while a
// run writes to it ends the run at once as failed (exit 1), with one
// sentence naming the store, what happened, the last action committed and
// the witness; ralph runs then says it for that run.
var _ = suite.Add(e2e.Test{Name: "StoreLostEndsTheRun", Run: func(t *testing.T, e *e2e.E) {
	for _, what := range []string{"removed", "replaced", "read-only"} {
		var needs []e2e.Need
		if what == "read-only" {
			needs = ext4Loop
		}
		e.Run(what, func(t *testing.T, e *e2e.E) {
			t.Parallel()
			dir := t.TempDir()
			store := filepath.Join(dir, "store")
			if what == "read-only" {
				store = filepath.Join(ext4Mount(t, dir), "store")
			}
			cfg := loopFor(t, dir, "200ms", 2000)
			ralph := e.Ralph("run", cfg, "--no-tui", "--store", store).Start()
			for range 3 {
				ralph.WaitLine("IterationCompleted")
			}
			lose(t, what, store)
			since := time.Now()
			out := ralph.Rest()
			code, took := exited(t, ralph, since, 15*time.Second)
			t.Logf("%s: ralph exited %d, %s after the store was %s", what, code, took.Round(time.Millisecond), what)
			sentence := "ledger store " + store + " "
			if errOut := ralph.Stderr(); code != 1 || !strings.Contains(errOut, sentence) || !strings.Contains(errOut, "so nothing more can be recorded") ||
				!strings.Contains(errOut, "witness") {
				t.Fatalf("exit %d, stderr:\n%s\nstdout:\n%s", code, errOut, out)
			}
			if strings.Contains(out, "stopped after") || strings.Contains(out, "done after") {
				t.Errorf("the run claims to have ended well:\n%s", out)
			}
			runs, _, rcode := e.Ralph("runs", "--json", "--store", store).Run()
			if rcode != 1 && what != "read-only" || !strings.Contains(runs, `"state":"lost"`) && what != "read-only" {
				t.Errorf("ralph runs after the store was %s: exit %d\n%s", what, rcode, runs)
			}
		}, needs...)
	}
}})

// lose removes store, replaces it by a new directory, or turns the file
// system under it read-only (ext4's errors=remount-ro after an error).
func lose(t *testing.T, what, store string) {
	t.Helper()
	switch what {
	case "removed":
		if err := os.RemoveAll(store); err != nil {
			t.Fatal(err)
		}
	case "replaced":
		if err := os.Rename(store, store+".old"); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(store, 0o700); err != nil {
			t.Fatal(err)
		}
	case "read-only":
		dev := filepath.Base(strings.TrimSpace(mountSource(t, filepath.Dir(store))))
		if err := os.WriteFile("/sys/fs/ext4/"+dev+"/trigger_fs_error", []byte("ralph test\n"), 0o200); err != nil {
			t.Fatalf("turn %s read-only: %v", filepath.Dir(store), err)
		}
	}
}

// ext4Loop is the need of a test that puts a store on a file system it
// turns read-only: ext4 on a loop device (ext4Mount), and findmnt.
var ext4Loop = []e2e.Need{e2e.Tool("truncate"), e2e.Tool("mkfs.ext4"), e2e.Tool("mount"), e2e.Tool("umount"), e2e.Tool("findmnt"),
	e2e.Probe("an ext4 file system on a loop device", func(dir string) error {
		mnt, err := mountExt4(dir)
		if err != nil {
			return err
		}
		return exec.Command("umount", mnt).Run()
	})}

// mountExt4 mounts a new 64 MiB ext4 file system (a loop device) with
// errors=remount-ro under dir and returns its mount point.
func mountExt4(dir string) (string, error) {
	img, mnt := filepath.Join(dir, "ext4.img"), filepath.Join(dir, "ext4")
	for _, c := range [][]string{{"truncate", "-s", "64M", img}, {"mkfs.ext4", "-q", img}, {"mkdir", mnt},
		{"mount", "-o", "loop,errors=remount-ro", img, mnt}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %v %s; a store on a file system turned read-only needs root and loop devices", strings.Join(c, " "), err, out)
		}
	}
	return mnt, nil
}

// ext4Mount is mountExt4 for a test, which unmounts it at its end.
func ext4Mount(t *testing.T, dir string) string {
	t.Helper()
	mnt, err := mountExt4(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", mnt, err, out)
		}
	})
	return mnt
}

// mountSource is the device mounted at mnt.
func mountSource(t *testing.T, mnt string) string {
	t.Helper()
	out, err := exec.Command("findmnt", "-no", "SOURCE", mnt).Output()
	if err != nil {
		t.Fatalf("findmnt %s: %v", mnt, err)
	}
	return string(out)
}

// A detached run whose store is removed ends, and since its log went with
// the store, ralph runs says why for its run id.
var _ = suite.Add(e2e.Test{Name: "DetachedRunStoreRemovedIsSaid", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	cfg := loopFor(t, dir, "200ms", 2000)
	out, errOut, code := e.Ralph("run", cfg, "--detach", "--store", store).Run()
	if code != 0 {
		t.Fatalf("run --detach: exit %d\n%s\n%s", code, out, errOut)
	}
	runID := liveRunID(t, store)
	pid := servingPID(t, e, store)
	if err := os.RemoveAll(store); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the detached run's process exits", func() bool { return !proctest.Alive(pid) })
	runs, _, code := e.Ralph("runs", "--store", store).Run()
	if code != 1 || !strings.Contains(runs, runID) || !strings.Contains(runs, "lost") || !strings.Contains(runs, "was removed") {
		t.Fatalf("ralph runs: exit %d\n%s", code, runs)
	}
}})

// servingPID is the pid of the ralph serving store's live run.
func servingPID(t *testing.T, e *e2e.E, store string) int {
	t.Helper()
	out, errOut, code := e.Ralph("runs", "--json", "--store", store).Run()
	if code != 0 {
		t.Fatalf("runs: exit %d %s", code, errOut)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			PID int `json:"pid"`
		}
		if json.Unmarshal([]byte(l), &r) == nil && r.PID > 0 {
			return r.PID
		}
	}
	t.Fatalf("no run with a pid:\n%s", out)
	return 0
}

// A store that cannot flush (Badger retries forever) is closed within its
// 10 s bound: ralph exits non-zero naming the store and its last witnessed
// action, leaving what is on disk as it is, and the store then verifies.
var _ = suite.Add(e2e.Test{Name: "StuckCloseIsBounded", Needs: immutableDirs, Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	cfg := loopFor(t, dir, "200ms", 6)
	ralph := e.Ralph("run", cfg, "--no-tui", "--store", store).Start()
	ralph.WaitLine("IterationCompleted")
	immutable(t, filepath.Join(store, "data"))
	ralph.WaitLine("stopped after 6 iteration(s)")
	since := time.Now()
	code, took := exited(t, ralph, since, 15*time.Second)
	t.Logf("closing a store that cannot flush, no signal: ralph exited %d, %s after the run's summary", code, took.Round(time.Millisecond))
	if errOut := ralph.Stderr(); code == 0 || !strings.Contains(errOut, "ledger store "+store+" did not close within 10s") ||
		!strings.Contains(errOut, "its last witnessed action is seq ") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	exec.Command("chattr", "-i", filepath.Join(store, "data")).Run()
	if out, errOut, code := e.Ralph("chain", "verify", "--store", store).Run(); code != 0 {
		t.Fatalf("chain verify: exit %d\n%s\n%s", code, out, errOut)
	}
}})

// SIGTERM ends ralph within 5 s in every phase of a run's life, and a
// second signal at once; a store that cannot flush is among them.
var _ = suite.Add(e2e.Test{Name: "NeverHangsOnASignal", Run: func(t *testing.T, e *e2e.E) {
	e.Run("starting", func(t *testing.T, e *e2e.E) {
		t.Parallel()
		for _, after := range []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond, 150 * time.Millisecond} {
			dir := t.TempDir()
			cfg := loopFor(t, dir, "200ms", 2000)
			ralph := e.Ralph("run", cfg, "--no-tui", "--store", filepath.Join(dir, "store")).Start()
			time.Sleep(after) // paces the signal into the start, not a check
			since := time.Now()
			ralph.Signal(syscall.SIGTERM)
			code, took := exited(t, ralph, since, signalBound)
			t.Logf("starting (+%s): exit %d in %s", after, code, took.Round(time.Millisecond))
			if code != 4 && code != 128+int(syscall.SIGTERM) {
				t.Errorf("SIGTERM %s into the start: exit %d, want 4 (aborted) or 143 (before ralph took signals)", after, code)
			}
		}
	})
	e.Run("running", func(t *testing.T, e *e2e.E) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "ralph.toml"), strings.Replace(stuckSaga, `(call :shell.exec {:cmd "sleep" :args ["300"]})`, `(call :ccos.echo {:message "unbooked"})`, 1))
		ralph := e.Ralph("run", filepath.Join(dir, "ralph.toml"), "--no-tui", "--store", filepath.Join(dir, "store")).Start()
		ralph.WaitLine("PlanStepStarted Long")
		since := time.Now()
		ralph.Signal(syscall.SIGTERM)
		code, took := exitedRun(t, ralph, since)
		t.Logf("running (a step that would sleep 60 s, then its plan's compensation): exit %d in %s", code, took.Round(time.Millisecond))
		if code != 4 {
			t.Fatalf("exit %d\n%s", code, ralph.Stderr())
		}
	})
	e.Run("compensating", func(t *testing.T, e *e2e.E) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "ralph.toml"), failingSaga)
		ralph := e.Ralph("run", filepath.Join(dir, "ralph.toml"), "--no-tui", "--store", filepath.Join(dir, "store")).Start()
		ralph.WaitLine("CompensationStarted Unbook")
		since := time.Now()
		ralph.Signal(syscall.SIGTERM)
		code, took := exitedRun(t, ralph, since)
		t.Logf("compensating (a failure's compensation that would sleep 300 s): exit %d in %s", code, took.Round(time.Millisecond))
		if code != 4 {
			t.Fatalf("exit %d\n%s", code, ralph.Stderr())
		}
		show, _, _ := e.Ralph("chain", "show", "--json", "--store", filepath.Join(dir, "store")).Run()
		if !strings.Contains(show, `"cut_off":true`) || !strings.Contains(show, "RunAborted") {
			t.Errorf("the compensation is not recorded as cut off, or the run as aborted:\n%s", show)
		}
	})
	for _, second := range []bool{false, true} {
		name := "closing a store that cannot flush"
		if second {
			name += ", twice"
		}
		e.Run(name, func(t *testing.T, e *e2e.E) {
			t.Parallel()
			dir := t.TempDir()
			store := filepath.Join(dir, "store")
			ralph := e.Ralph("run", loopFor(t, dir, "200ms", 4), "--no-tui", "--store", store).Start()
			ralph.WaitLine("IterationCompleted")
			immutable(t, filepath.Join(store, "data"))
			ralph.WaitLine("stopped after 4 iteration(s)")
			since := time.Now()
			ralph.Signal(syscall.SIGTERM)
			if second {
				time.Sleep(100 * time.Millisecond) // the second signal comes after the first, not a check
				ralph.Signal(syscall.SIGTERM)
			}
			code, took := exited(t, ralph, since, signalBound)
			t.Logf("%s: exit %d in %s", name, code, took.Round(time.Millisecond))
			switch {
			case second && code != 128+int(syscall.SIGTERM):
				t.Errorf("after a second SIGTERM: exit %d, want 143 (ended by the signal)", code)
			case !second && (code != 4 || !strings.Contains(ralph.Stderr(), "ledger store "+store+" is left as it is on disk")):
				t.Errorf("exit %d\n%s", code, ralph.Stderr())
			}
		}, immutableDirs...)
	}
	e.Run("detached", func(t *testing.T, e *e2e.E) {
		t.Parallel()
		dir := t.TempDir()
		store := filepath.Join(dir, "store")
		cfg := loopFor(t, dir, "200ms", 2000)
		if out, errOut, code := e.Ralph("run", cfg, "--detach", "--store", store).Run(); code != 0 {
			t.Fatalf("run --detach: exit %d\n%s\n%s", code, out, errOut)
		}
		liveRunID(t, store)
		pid := servingPID(t, e, store)
		since := time.Now()
		syscall.Kill(pid, syscall.SIGTERM)
		waitUntil(t, "the detached ralph exits", func() bool { return !proctest.Alive(pid) })
		took := time.Since(since)
		t.Logf("detached: gone in %s", took.Round(time.Millisecond))
		if took > signalBound {
			t.Errorf("the detached ralph took %s to exit after SIGTERM", took)
		}
		if runs, _, _ := e.Ralph("runs", "--store", store).Run(); !strings.Contains(runs, "aborted") {
			t.Errorf("the detached run is not recorded as aborted:\n%s", runs)
		}
	})
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		name := "UI waiting for q, a store that cannot flush, " + sig.String()
		e.Run(name, func(t *testing.T, e *e2e.E) {
			t.Parallel()
			uiWaitingEnds(t, e, sig)
		}, append([]e2e.Need{e2e.Tmux}, immutableDirs...)...)
	}
}})

// failingSaga books, then fails: its compensation would sleep 300 s.
const failingSaga = `[plan]
rtfs = '''
(do
  (step.with-compensation
    (step "Book" (call :kv.put {:key "booked" :value true}))
    (step "Unbook" (call :shell.exec {:cmd "sleep" :args ["300"]})))
  (step "Fail" (throw "the plan fails after booking")))
'''
[[stop]]
kind = "max_iterations"
max = 1
[governance]
shell_allow = ["sleep"]
`

// exitedRun is exited bounded by signalBound.
func exitedRun(t *testing.T, ralph *e2e.Proc, since time.Time) (int, time.Duration) {
	t.Helper()
	return exited(t, ralph, since, signalBound)
}

// uiWaitingEnds runs a loop in the UI until it has ended, makes its store
// unable to flush, and sends sig: ralph exits within 5 s.
func uiWaitingEnds(t *testing.T, e *e2e.E, sig syscall.Signal) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	cfg := loopFor(t, dir, "100ms", 3)
	tm := e.Ralph("run", cfg, "--store", store).Term()
	pid := tm.Pid()
	t.Cleanup(func() {
		if proctest.Alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	tm.WaitIdle(e2e.UntilEnd)
	immutable(t, filepath.Join(store, "data"))
	since := time.Now()
	if sig == syscall.SIGHUP {
		// The terminal closing is what sends a UI its SIGHUP.
		tm.Close()
	} else {
		syscall.Kill(pid, sig)
	}
	waitUntil(t, "ralph exits", func() bool { return !proctest.Alive(pid) })
	took := time.Since(since)
	t.Logf("UI waiting for q, %s: gone in %s", sig, took.Round(time.Millisecond))
	if took > signalBound {
		t.Errorf("ralph took %s to exit after %s", took, sig)
	}
}
