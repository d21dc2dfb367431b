package cli_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/fleet/fleettest"
)

// startWorker starts `ralph worker` on the fleet at url; the test ends it.
func startWorker(t *testing.T, url, id string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(ralphBin, withCreds([]string{"worker", "--nats", url, "--slots", "1", "--dir", filepath.Join(dir, "w"), "--id", id})...)
	out, err := os.Create(filepath.Join(dir, "worker.out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("worker %s:\n%s", id, b)
		}
	})
}

// ralph attach --nats: the live UI of a run on a worker, through a tunnel
// over NATS; its controls reach the run (a aborts it after asking), and
// runs --nats shows the run on its worker meanwhile.
func TestE2EFleetAttachLive(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	url := fleettest.Node(t).ClientURL()
	fj := openFleetJobs(t, url)
	repo := newSubmitRepo(t, map[string]string{"ralph.toml": `[intent]
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
max = 400
[governance]
allow = ["ccos.*"]
`})
	startWorker(t, url, "w-attach")
	stdout, stderr, code := runBinary(t, ralphBin, "", "submit", filepath.Join(repo.work, "ralph.toml"), "--nats", url, "--workspace", repo.bare+"@main")
	if code != 0 {
		t.Fatalf("submit: exit %d, %q", code, stderr)
	}
	id := strings.TrimSpace(stdout)
	waitUntil(t, "the worker runs the run", func() bool {
		s, found, err := fleet.GetState(context.Background(), fj.h.Runs, id)
		return err == nil && found && s.State == fleet.StateRunning && s.Iteration >= 1
	})
	out, _, code := runBinary(t, ralphBin, "", "runs", "--nats", url)
	if code != 0 || !strings.Contains(out, id+"  running  w-attach") {
		t.Errorf("runs --nats while the run goes on:\n%s", out)
	}

	tm := newTmux(t, ralphBin+" attach --nats "+url+" --creds "+fleetCreds(t, url, fleet.RoleSubmitter)+" "+id[:13]+"; echo EXIT $?; sleep 60")
	if s := tm.waitIdle(1); !strings.Contains(s, "Causal chain") || !strings.Contains(s, "Stop conditions") {
		t.Fatalf("attach --nats does not show the chain and the conditions:\n%s", s)
	}
	tm.send("a")
	tm.waitFor("Abort the run?")
	tm.send("y")
	waitUntil(t, "the run is aborted", func() bool {
		s, _, err := fleet.GetState(context.Background(), fj.h.Runs, id)
		return err == nil && s.State == fleet.StateAborted
	})
	if s := tm.waitIdle(untilEnd); !strings.Contains(s, "aborted by the user · q quits") {
		t.Fatalf("attach --nats after the abort:\n%s", s)
	}
	tm.send("q")
	if s := tm.waitFor("EXIT "); !strings.Contains(s, "EXIT 0") {
		t.Errorf("attach --nats after the run ended:\n%s", s)
	}

	// The aborted run's chain, from the stream, records the abort.
	out, stderr, code = runBinary(t, ralphBin, "", "chain", "show", "--nats", url, "--run", id)
	if code != 0 || !strings.Contains(out, "RunAborted") {
		t.Errorf("chain show --nats of the aborted run: exit %d, %q\n%s", code, stderr, out)
	}
}
