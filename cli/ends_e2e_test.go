package cli_test

// Every process ends (DESIGN §18): a UI run whose terminal closes, a run
// that takes SIGTERM during a compensation, a socket under many streams.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/internal/proctest"
	"github.com/ralphloop/ralph/serve"
)

// A foreground UI run exits when its run has ended, whether its terminal
// closes before the UI is up, while the run goes on, or after it ended.
var _ = suite.Add(e2e.Test{Name: "TerminalClosedRunExits", Needs: []e2e.Need{e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
	for _, when := range []string{"before", "during", "after"} {
		e.Run(when, func(t *testing.T, e *e2e.E) {
			t.Parallel()
			dir := t.TempDir()
			cfg := slowLoop(t, dir, 4)
			store := filepath.Join(dir, "store")
			tm := e.Ralph("run", cfg, "--store", store).Term()
			pid := tm.Pid()
			t.Cleanup(func() {
				if proctest.Alive(pid) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			switch when {
			case "during":
				waitIteration(t, tm, store, 2)
			case "after":
				if s := tm.WaitIdle(e2e.UntilEnd); !strings.Contains(s, "Stopped by enough") {
					t.Fatalf("the UI's end lacks the stop:\n%s", s)
				}
			}
			tm.Close()
			waitUntil(t, "ralph (pid "+strconv.Itoa(pid)+") exits", func() bool { return !proctest.Alive(pid) })
			if _, err := os.Stat(filepath.Join(store, "data")); err == nil {
				if runs, _, _ := e.Ralph("runs", "--store", store).Run(); strings.Contains(runs, "running") {
					t.Errorf("a run is left running after its process exited:\n%s", runs)
				}
			}
		})
	}
}})

const stuckSaga = `[plan]
rtfs = '''
(do
  (step.with-compensation
    (step "Book" (call :kv.put {:key "booked" :value true}))
    (step "Unbook" (call :shell.exec {:cmd "sleep" :args ["300"]})))
  (step "Long" (call :shell.exec {:cmd "sleep" :args ["60"]})))
'''
[[stop]]
kind = "max_iterations"
max = 1
[governance]
shell_allow = ["sleep"]
`

// SIGTERM aborts a run: a compensation that would sleep for minutes is cut
// off after the signal's grace and recorded as cut off; a second SIGTERM
// during the compensation ends ralph at once.
var _ = suite.Add(e2e.Test{Name: "SigtermCutsACompensationOff", Run: func(t *testing.T, e *e2e.E) {
	e.Run("grace", func(t *testing.T, e *e2e.E) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "ralph.toml"), stuckSaga)
		cmd := e.Ralph("run", filepath.Join(dir, "ralph.toml"), "--no-tui").Start()
		cmd.WaitLine("PlanStepStarted Long")
		if err := cmd.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		out := cmd.Rest()
		if code := exitCode(cmd.Wait()); code != 4 || !strings.Contains(out, "RunAborted") {
			t.Fatalf("exit %d\n%s\n%s", code, out, cmd.Stderr())
		}
		show, _, _ := e.Ralph("chain", "show", "--json", "--store", filepath.Join(dir, ".ralph")).Run()
		if !strings.Contains(show, `"cut_off":true`) || !strings.Contains(show, "cut off: ralph ends within 5s of a signal, and its compensations get 4s of them in all") {
			t.Errorf("the compensation is not recorded as cut off:\n%s", show)
		}
	})
	e.Run("second signal", func(t *testing.T, e *e2e.E) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "ralph.toml"), stuckSaga)
		cmd := e.Ralph("run", filepath.Join(dir, "ralph.toml"), "--no-tui").Start()
		cmd.WaitLine("PlanStepStarted Long")
		cmd.Signal(syscall.SIGTERM)
		cmd.WaitLine("CompensationStarted Unbook")
		cmd.Signal(syscall.SIGTERM)
		cmd.Rest()
		err := cmd.Wait()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Errorf("after a second SIGTERM: %v, want ended by the signal", err)
		}
	})
}})

// 200 clients open event streams on a running loop's socket at once: 64
// are served (half of them never read), the rest are told why with a 503,
// and the loop goes on recording iterations and ends with its closing
// action, which every reading stream receives.
var _ = suite.Add(e2e.Test{Name: "SocketUnderManyStreams", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg, release := releasedLoop(t, dir)
	writeFile(t, cfg, strings.Replace(readFile(t, cfg), `delay = "300ms"`, `delay = "0s"`, 1))
	store := filepath.Join(dir, "store")
	cmd := e.Ralph("run", cfg, "--no-tui", "--store", store).In(dir).Start()
	runID := liveRunID(t, store)
	const clients = 200
	type answer struct {
		status int
		body   string // a 503's body, or what a reading stream received
		read   bool
	}
	ended := make(chan struct{})
	answers := make(chan answer, clients)
	var opened sync.WaitGroup
	opened.Add(clients)
	for i := 0; i < clients; i++ {
		go func(reads bool) {
			conn, err := net.Dial("unix", serve.SocketPath(store))
			if err != nil {
				opened.Done()
				answers <- answer{body: err.Error()}
				return
			}
			defer conn.Close()
			fmt.Fprint(conn, "GET /v1/events?from=1 HTTP/1.1\r\nHost: ralph\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			opened.Done()
			if err != nil {
				answers <- answer{body: err.Error()}
				return
			}
			switch {
			case resp.StatusCode != http.StatusOK:
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				answers <- answer{status: resp.StatusCode, body: string(b)}
			case !reads: // a slow reader: it never reads, and holds its stream until the run has ended
				<-ended
				answers <- answer{status: resp.StatusCode}
			default:
				b, _ := io.ReadAll(resp.Body) // until the server closes the stream at its end
				answers <- answer{status: resp.StatusCode, body: string(b), read: true}
			}
		}(i%2 == 0)
	}
	opened.Wait()
	head := func() uint64 {
		c, err := serve.Dial(context.Background(), store)
		if err != nil {
			return 0
		}
		defer c.Close()
		return c.Info().Head
	}
	// The loop goes on while every stream is open: 100 more iterations
	// (each at least four actions) are recorded.
	from := head()
	waitUntil(t, "the loop records 100 iterations under 200 clients", func() bool { return head() >= from+400 })
	release()
	err := cmd.Wait()
	close(ended)
	if err != nil {
		t.Fatalf("the run exited %v", err)
	}
	var served, refused int
	for i := 0; i < clients; i++ {
		a := <-answers
		switch a.status {
		case http.StatusOK:
			served++
			if a.read && !regexp.MustCompile(`"Run(Stopped|Completed)"`).MatchString(a.body) {
				t.Errorf("a reading stream ended without the run's closing action (%d bytes)", len(a.body))
			}
		case http.StatusServiceUnavailable:
			refused++
			if !strings.Contains(a.body, "already serves 64 streams, its most at once; close an attached UI") {
				t.Errorf("a refused stream was told %q", a.body)
			}
		default:
			t.Errorf("a client got %d %q", a.status, a.body)
		}
	}
	if served != 64 || refused != clients-64 {
		t.Errorf("%d streams served and %d refused, want 64 and %d", served, refused, clients-64)
	}
	waitClosed(t, e, store, runID)
}})
