package cli_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/fleet/fleettest"
	"github.com/ralphloop/ralph/internal/e2e"
)

// startWorker starts `ralph worker` on the fleet at url; the test ends it.
func startWorker(t *testing.T, e *e2e.E, url, id string) {
	t.Helper()
	e.Ralph("worker", "--nats", url, "--slots", "1", "--dir", filepath.Join(t.TempDir(), "w"), "--id", id).Start()
}

// ralph attach --nats: the live UI of a run on a worker, through a tunnel
// over NATS; its controls reach the run (a aborts it after asking), and
// runs --nats shows the run on its worker meanwhile.
var _ = suite.Add(e2e.Test{Name: "FleetAttachLive", Needs: []e2e.Need{e2e.Tool("git"), e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
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
	startWorker(t, e, url, "w-attach")
	stdout, stderr, code := e.Ralph("submit", filepath.Join(repo.work, "ralph.toml"), "--nats", url, "--workspace", repo.bare+"@main").Run()
	if code != 0 {
		t.Fatalf("submit: exit %d, %q", code, stderr)
	}
	id := strings.TrimSpace(stdout)
	waitUntil(t, "the worker runs the run", func() bool {
		s, found, err := fleet.GetState(context.Background(), fj.h.Runs, id)
		return err == nil && found && s.State == fleet.StateRunning && s.Iteration >= 1
	})
	out, _, code := e.Ralph("runs", "--nats", url).Run()
	if code != 0 || !strings.Contains(out, id+"  running  w-attach") {
		t.Errorf("runs --nats while the run goes on:\n%s", out)
	}

	tm := e.Ralph("attach", "--nats", url, "--creds", fleetCreds(t, url, fleet.RoleSubmitter), id[:13]).Term()
	if s := tm.WaitIdle(1); !strings.Contains(s, "Causal chain") || !strings.Contains(s, "Stop conditions") {
		t.Fatalf("attach --nats does not show the chain and the conditions:\n%s", s)
	}
	tm.Send("a")
	tm.WaitFor("Abort the run?")
	tm.Send("y")
	waitUntil(t, "the run is aborted", func() bool {
		s, _, err := fleet.GetState(context.Background(), fj.h.Runs, id)
		return err == nil && s.State == fleet.StateAborted
	})
	if s := tm.WaitIdle(e2e.UntilEnd); !strings.Contains(s, "aborted by the user · q quits") {
		t.Fatalf("attach --nats after the abort:\n%s", s)
	}
	tm.Send("q")
	if code := tm.Exit(); code != 0 {
		t.Errorf("attach --nats after the run ended: exit %d\n%s", code, tm.Screen())
	}

	// The aborted run's chain, from the stream, records the abort.
	out, stderr, code = e.Ralph("chain", "show", "--nats", url, "--run", id).Run()
	if code != 0 || !strings.Contains(out, "RunAborted") {
		t.Errorf("chain show --nats of the aborted run: exit %d, %q\n%s", code, stderr, out)
	}
}})
