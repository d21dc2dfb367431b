package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// The run ids of runIDStore's runs, oldest first: the first two share the
// prefix "0aaa", and the last is the latest.
var runIDs = []string{
	"0aaa0001-0000-7000-8000-000000000001",
	"0aaa0002-0000-7000-8000-000000000002",
	"0bbb0003-0000-7000-8000-000000000003",
}

// runIDStore is a store holding the quickstart run three times under
// runIDs, the first with one iteration, the second with two and the last
// with three, so that what each command prints tells the runs apart.
func runIDStore(t *testing.T, e *e2e.E) string {
	t.Helper()
	store := filepath.Join(e.Dir, "runid-store")
	for i, id := range runIDs {
		max := []string{"1", "2", "3"}[i]
		_, errOut, code := e.Ralph("run", "../examples/quickstart/ralph.toml", "--store", store, "--no-tui", "--run-id", id, "--max-iterations", max).Run()
		if code != 0 && code != 3 {
			t.Fatalf("quickstart run %s: %s", id, errOut)
		}
	}
	return store
}

// Every command that takes a RUN_ID accepts a unique prefix and latest, and
// where it takes one positional RUN_ID, none means the latest, said on
// stderr; an ambiguous prefix lists the runs it matches (exit 2), an
// unknown one says so (exit 2).
var _ = suite.Add(e2e.Test{Name: "RunIDs", Run: func(t *testing.T, e *e2e.E) {
	store := runIDStore(t, e)
	type command struct {
		name string
		args func(ref string) []string // ref "" is no RUN_ID
		// optional: the RUN_ID may be left out; byStderr: the command
		// names the run on stderr (it fails for these runs), not by what
		// it prints.
		optional, byStderr bool
	}
	positional := func(verb []string, after ...string) func(string) []string {
		return func(ref string) []string {
			a := append([]string{}, verb...)
			if ref != "" {
				a = append(a, ref)
			}
			return append(append(a, after...), "--store", store)
		}
	}
	flag := func(verb ...string) func(string) []string {
		return func(ref string) []string {
			return append(append([]string{}, verb...), "--run", ref, "--store", store)
		}
	}
	commands := []command{
		{name: "history", args: positional([]string{"history"}, "--json"), optional: true},
		{name: "predicate", args: positional([]string{"predicate"}, "true")},
		{name: "chain show", args: flag("chain", "show", "--json")},
		{name: "chain export", args: flag("chain", "export")},
		{name: "view --output", args: positional([]string{"view"}, "--output", "last"), optional: true, byStderr: true},
		{name: "resume", args: positional([]string{"resume"}, "--no-tui"), optional: true, byStderr: true},
	}
	refs := []struct {
		name, ref string
		want      int // index in runIDs
	}{
		{"prefix", "0aaa0001", 0},
		{"short prefix", "0b", 2},
		{"latest", "latest", 2},
	}
	for _, c := range commands {
		e.Run(c.name, func(t *testing.T, e *e2e.E) { // one after another: some open the store, which one process at a time may
			// What the command prints for each run, named by its whole id.
			whole := make([]string, len(runIDs))
			for i, id := range runIDs {
				out, errOut, _ := e.Ralph(c.args(id)...).Run()
				whole[i] = out
				if c.byStderr {
					whole[i] = errOut
					if !strings.Contains(errOut, id) {
						t.Fatalf("ralph %q: stderr %q does not name the run", c.args(id), errOut)
					}
				}
			}
			if !c.byStderr && (whole[0] == whole[2] || whole[0] == "") {
				t.Fatalf("ralph %s prints the same for two runs; the test cannot tell them apart: %q", c.name, whole[0])
			}
			check := func(label, ref string, want int, note bool) {
				out, errOut, _ := e.Ralph(c.args(ref)...).Run()
				got := out
				if c.byStderr {
					got = errOut
				}
				if strings.Contains(errOut, "no RUN_ID given") != note {
					t.Errorf("%s: ralph %q: stderr %q; want a note naming the latest run: %t", label, c.args(ref), errOut, note)
				}
				if c.byStderr {
					got = strings.Replace(got, "ralph: no RUN_ID given: reading the latest run, "+runIDs[want]+", started ", "", 1)
					if !strings.Contains(got, runIDs[want]) {
						t.Errorf("%s: ralph %q: stderr %q does not name run %s", label, c.args(ref), errOut, runIDs[want])
					}
					return
				}
				if got != whole[want] {
					t.Errorf("%s: ralph %q printed\n%.300s\nwant what it prints for %s:\n%.300s", label, c.args(ref), got, runIDs[want], whole[want])
				}
			}
			for _, r := range refs {
				check(r.name, r.ref, r.want, false)
			}
			if c.optional {
				check("none", "", 2, true)
			}
			out, errOut, code := e.Ralph(c.args("0aaa")...).Run()
			if code != 2 || out != "" || !strings.Contains(errOut, `run id prefix "0aaa" matches 2 runs (`+runIDs[0]+", "+runIDs[1]+"); give more of the id") {
				t.Errorf("ambiguous: ralph %q: exit %d, stdout %q, stderr %q", c.args("0aaa"), code, out, errOut)
			}
			out, errOut, code = e.Ralph(c.args("0ccc")...).Run()
			if code != 2 || out != "" || !strings.Contains(errOut, "no run 0ccc in this store; `ralph runs` lists them") {
				t.Errorf("unknown: ralph %q: exit %d, stdout %q, stderr %q", c.args("0ccc"), code, out, errOut)
			}
		})
	}
	// attach needs a terminal: its answers for these ended runs, in tmux,
	// their messages written to a file.
	e.Run("attach", func(t *testing.T, e *e2e.E) {
		out := filepath.Join(t.TempDir(), "attach.err")
		done := filepath.Join(t.TempDir(), "done")
		var script strings.Builder
		for _, ref := range []string{"0aaa0001", "0aaa", "latest", "0ccc", ""} {
			script.WriteString("ralph attach " + ref + " --store " + store + " 2>>" + out + "; echo \"exit $?\" >>" + out + "; ")
		}
		e.TermShell(script.String() + "echo done > " + done + "; sleep 30")
		e.WaitFile(done)
		b, _ := os.ReadFile(out)
		got := string(b)
		for _, want := range []string{
			"run " + runIDs[0] + " has ended (stopped); `ralph view " + runIDs[0] + "` shows it\nexit 2\n",
			`run id prefix "0aaa" matches 2 runs (` + runIDs[0] + ", " + runIDs[1] + "); give more of the id",
			"run " + runIDs[2] + " has ended (done); `ralph view " + runIDs[2] + "` shows it\nexit 2\n",
			"no run 0ccc in this store",
			"ralph: no RUN_ID given: reading the latest run, " + runIDs[2] + ", started ",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("ralph attach: stderr lacks %q:\n%s", want, got)
			}
		}
	}, e2e.Tmux)
}})
