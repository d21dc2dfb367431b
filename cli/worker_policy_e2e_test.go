package cli_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/internal/e2e"
)

// evilJob is a job that brings its own governance to run sh on a worker:
// its plan writes `id` into out, and its stop condition runs sh too when
// stopCmd is set.
func evilJob(out string, stopCmd bool) string {
	cfg := fmt.Sprintf(`[intent]
goal = "evil"
[model]
provider = "static"
[plan]
rtfs = '''(step "Id" (call :shell.exec {:cmd "sh" :args ["-c" "id > %s"]}))'''
[[stop]]
name = "once"
kind = "max_iterations"
max = 1
`, out)
	if stopCmd {
		return strings.Replace(cfg, "[[stop]]", fmt.Sprintf("[[stop]]\nname = \"probe\"\nkind = \"command\"\ncmd = [\"sh\", \"-c\", \"id > %s\"]\n[[stop]]", out), 1)
	}
	return cfg + "[governance]\nshell_allow = [\"sh\"]\n"
}

// A worker without --policy refuses a job that brings its own
// shell_allow, or runs a program in a stop condition, before anything of
// it runs: the run fails with the reason in its state and in `ralph runs
// --nats`, the job is not delivered again, and sh never ran.
var _ = suite.Add(e2e.Test{Name: "WorkerWithoutPolicyRefusesShell", Serial: true, Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	f := newE2EFleet(t, e)
	f.workerArgs("plain", 1, nil)
	dir := t.TempDir()
	cases := []struct{ out, id, want string }{
		{out: filepath.Join(dir, "shell_allow"), want: `its [governance].shell_allow names "sh", which the policy's shell_allow [] does not`},
		{out: filepath.Join(dir, "stop"), want: `its stop condition "probe" runs "sh", which the policy's shell_allow [] does not name`},
	}
	for i := range cases {
		cases[i].id = f.submit(evilJob(cases[i].out, i == 1))
	}
	const prefix = "job refused by the worker's default policy (no --policy: no shell.exec, no program, no agent): "
	for _, c := range cases {
		s := f.waitFinal(c.id)
		if s.State != fleet.StateFailed || s.Deliveries != 1 || s.Worker != "plain" ||
			s.Error != prefix+c.want+"; run it on a worker whose --policy allows it" {
			t.Errorf("run %s: state %+v; want failed on its first delivery with %q", c.id, s, c.want)
		}
		if _, err := os.Stat(c.out); !os.IsNotExist(err) {
			t.Errorf("%s exists (%v): sh ran", c.out, err)
		}
		out, errOut, code := e.Ralph("runs", "--nats", f.url).Run()
		if code != 0 || !strings.Contains(out, c.id) || !strings.Contains(out, prefix+c.want) {
			t.Errorf("runs --nats: exit %d\n%s%s\nwant run %s with %q", code, out, errOut, c.id, c.want)
		}
	}
	for _, c := range cases {
		if _, err := f.h.Chains.GetLastMsgForSubject(context.Background(), fleet.ChainSubject(c.id)); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Errorf("run %s: the refused run has a chain in the stream (%v)", c.id, err)
		}
	}
}})

// A worker's policy narrows what a job gets: a job without an iteration
// bound runs to the policy's max_iterations, and a job whose workspace the
// policy does not list is refused naming it.
var _ = suite.Add(e2e.Test{Name: "WorkerPolicyCeiling", Serial: true, Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	f := newE2EFleet(t, e)
	policy := filepath.Join(t.TempDir(), "worker.toml")
	writeFile(t, policy, fmt.Sprintf("[governance]\nmax_iterations = 2\nworkspaces = [%q]\n", filepath.Dir(f.bare)+"/*.git"))
	f.workerArgs("bounded", 1, []string{"--policy", policy})
	unbounded := f.submit(`[intent]
goal = "echo"
[model]
provider = "static"
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "hi"}))'
`)
	s := f.waitFinal(unbounded)
	if s.State != fleet.StateLimit || s.Iteration != 2 || s.Condition != "worker-policy-max-iterations" {
		t.Errorf("unbounded job: state %+v; want stopped by the policy after 2 iterations", s)
	}
	over := f.submit(`[intent]
goal = "echo"
[model]
provider = "static"
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "hi"}))'
[[stop]]
name = "many"
kind = "max_iterations"
max = 5
`)
	s = f.waitFinal(over)
	if want := "job refused by worker policy " + policy + ": its max_iterations stop condition allows 5 iterations, above the policy's max_iterations 2"; s.State != fleet.StateFailed || !strings.HasPrefix(s.Error, want) {
		t.Errorf("job over the ceiling: state %+v; want failed with %q", s, want)
	}
	elsewhere := t.TempDir() + "/other.git"
	id := f.submitTo(`[intent]
goal = "echo"
[model]
provider = "static"
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "hi"}))'
`, elsewhere)
	s = f.waitFinal(id)
	if want := fmt.Sprintf("its workspace %s matches none of the policy's workspaces", elsewhere); s.State != fleet.StateFailed || !strings.Contains(s.Error, want) {
		t.Errorf("job on another workspace: state %+v; want failed with %q", s, want)
	}
}})
