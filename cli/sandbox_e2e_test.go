package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/sandbox"
)

// sandboxLoop is a one-iteration static loop that starts processes: a
// shell.exec step and a command stop condition.
const sandboxLoop = `[plan]
rtfs = '(step "Say" (call :shell.exec {:cmd "echo" :args ["hi"]}))'
[governance]
shell_allow = ["echo"]
[[stop]]
name = "echoed"
kind = "command"
cmd = ["true"]
[[stop]]
kind = "max_iterations"
max = 1
`

// A run with [sandbox] mode = "off", with --sandbox off, or with no
// [sandbox] at all runs as it did before there was a sandbox: the same
// exit, its store in .ralph beside the config, and nothing said of a
// sandbox on its first line or on RunStarted.
var _ = suite.Add(e2e.Test{Name: "SandboxOffRunsAsBefore", Run: func(t *testing.T, e *e2e.E) {
	for _, c := range []struct {
		name, extra string
		args        []string
	}{
		{"no section", "", nil},
		{"mode off", "[sandbox]\nmode = \"off\"\n", nil},
		{"flag off", "[sandbox]\nmode = \"landlock\"\n", []string{"--sandbox", "off"}},
	} {
		e.Run(c.name, func(t *testing.T, e *e2e.E) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "ralph.toml"), sandboxLoop+c.extra)
			out, errOut, code := e.Ralph(append([]string{"run", "--no-tui"}, c.args...)...).In(dir).Run()
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			first, _, _ := strings.Cut(out, "\n")
			if !strings.Contains(first, "RunStarted") || strings.Contains(out+errOut, "sandbox") {
				t.Errorf("a run with no sandbox speaks of one (first line %q):\n%s\n%s", first, out, errOut)
			}
			if _, err := os.Stat(filepath.Join(dir, ".ralph")); err != nil {
				t.Errorf("the store is not in .ralph beside the config: %v", err)
			}
			show, errOut, code := e.Ralph("chain", "show", "--json").In(dir).Run()
			if code != 0 || !strings.Contains(show, `"RunStarted"`) || strings.Contains(show, `"sandbox"`) {
				t.Errorf("chain show: exit %d %s\nRunStarted must carry no sandbox:\n%s", code, errOut, show)
			}
		})
	}
}})

// A mode this machine cannot give refuses the run before anything starts:
// exit 2, sandbox.New's sentence on stderr, and no store left behind.
// bwrap is made impossible by a PATH without it.
var _ = suite.Add(e2e.Test{Name: "SandboxImpossibleModeRefused", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ralph.toml"), "[plan]\nrtfs = '(do 1)'\n[[stop]]\nkind = \"max_iterations\"\nmax = 1\n[sandbox]\nmode = \"bwrap\"\n")
	out, errOut, code := e.Ralph("run", "--no-tui").In(dir).With("PATH=" + t.TempDir()).Run()
	if code != 2 || !strings.HasPrefix(errOut, "ralph: ") || !strings.Contains(errOut, "bwrap") || strings.Count(errOut, "\n") != 1 || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one sentence naming bwrap", code, out, errOut)
	}
	for _, d := range []string{filepath.Join(dir, ".ralph"), filepath.Join(e.StateHome(), "ralph", "stores")} {
		if entries, err := os.ReadDir(d); err == nil && len(entries) > 0 {
			t.Errorf("a refused run left a store in %s", d)
		}
	}
}})

// --sandbox takes a mode: anything else is a usage error (exit 2) on run,
// resume and worker, naming the modes; a bad [sandbox] value is refused
// at its file:line:col, an unknown [sandbox] key at its line.
var _ = suite.Add(e2e.Test{Name: "SandboxBadModes", Files: map[string]string{"ralph.toml": sandboxLoop}, Run: func(t *testing.T, e *e2e.E) {
	want := `ralph: --sandbox: sandbox mode "bogus" is not one of off, auto, landlock or bwrap`
	for _, args := range [][]string{{"run", "--no-tui"}, {"resume"}, {"worker"}} {
		_, errOut, code := e.Ralph(append(args, "--sandbox", "bogus")...).In(e.Dir).Run()
		if code != 2 || !strings.HasPrefix(errOut, want) {
			t.Errorf("%s --sandbox bogus: exit %d, stderr %q; want exit 2 and %q", args[0], code, errOut, want)
		}
	}
	for _, c := range []struct{ extra, want string }{
		{"[sandbox]\nmode = \"jail\"\n", `ralph: ralph.toml:13:8: sandbox mode "jail" is not one of off, auto, landlock or bwrap; write one of them, or leave [sandbox] out for none`},
		{"[sandbox]\nnetwork = \"some\"\n", `ralph: ralph.toml:13:11: sandbox network "some" is not one of model, none or all; leave it out for model, the default`},
		{"[sandbox]\nmode = \"off\"\nnetwrok = \"none\"\n", `ralph: ralph.toml:14: unknown key sandbox.netwrok; did you mean sandbox.network?`},
	} {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "ralph.toml"), sandboxLoop+c.extra)
		_, errOut, code := e.Ralph("run", "ralph.toml", "--no-tui").In(dir).Run()
		if code != 2 || strings.TrimSpace(errOut) != c.want {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", c.extra, code, errOut, c.want)
		}
	}
}})

// Under a sandbox the store must not be in the workdir, which the
// sandbox shows: a --store there is refused (exit 2) with the fix before
// the sandbox is asked for.
var _ = suite.Add(e2e.Test{Name: "SandboxStoreInWorkdirRefused", Files: map[string]string{"ralph.toml": sandboxLoop}, Run: func(t *testing.T, e *e2e.E) {
	_, errOut, code := e.Ralph("run", "--no-tui", "--sandbox", "auto", "--store", "st").In(e.Dir).Run()
	if code != 2 || !strings.Contains(errOut, "--store names the store st, inside the workdir") ||
		!strings.Contains(errOut, "name a store outside the workdir, or leave --store, RALPH_STORE and store.dir unset") {
		t.Errorf("exit %d, stderr %q; want exit 2 and the fix", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(e.Dir, "st")); !os.IsNotExist(err) {
		t.Errorf("the refused store was made (%v)", err)
	}
}})

// `ralph exec` runs its plan in the config's sandbox as a loop would: a
// shell.exec that reads a file beside the workdir is refused under
// Landlock (the plan fails, exit 1), and reads it without [sandbox].
var _ = suite.Add(e2e.Test{Name: "SandboxExec", Needs: []e2e.Need{mechanismNeed(sandbox.Landlock)}, Run: func(t *testing.T, e *e2e.E) {
	root := t.TempDir()
	dir, other := filepath.Join(root, "work"), filepath.Join(root, "other")
	secret := filepath.Join(other, "secret.txt")
	for _, d := range []string{dir, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, secret, "the other project's secret\n")
	writeFile(t, filepath.Join(dir, "plan.rtfs"), `(call :shell.exec {:cmd "cat" :args ["`+secret+`"]})`)
	base := "[governance]\nshell_allow = [\"cat\"]\n"
	writeFile(t, filepath.Join(dir, "ralph.toml"), base)
	out, errOut, code := e.Ralph("exec", "plan.rtfs").In(dir).Run()
	if code != 0 || !strings.Contains(out, "the other project's secret") {
		t.Fatalf("without [sandbox] exec read the file? exit %d\n%s\n%s", code, out, errOut)
	}
	if err := os.RemoveAll(filepath.Join(dir, ".ralph")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "ralph.toml"), base+"[sandbox]\nmode = \"landlock\"\n")
	out, errOut, code = e.Ralph("exec", "plan.rtfs").In(dir).Run()
	if code != 1 || strings.Contains(out+errOut, "the other project's secret") {
		t.Errorf("under landlock exec must fail to read %s: exit %d\n%s\n%s", secret, code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, ".ralph")); err == nil {
		t.Errorf("under a sandbox the default store must move out of the workdir, as a run's does")
	}
}})

// A run sandboxed by --sandbox alone (no [sandbox] in its config) keeps its
// store in ralph's state directory, and the commands that read a store
// find it there without the flag: ralph runs lists the run, and no .ralph
// is made in the workdir.
var _ = suite.Add(e2e.Test{Name: "SandboxFlagStoreFound", Needs: []e2e.Need{mechanismNeed(sandbox.Landlock)},
	Files: map[string]string{"ralph.toml": sandboxLoop}, Run: func(t *testing.T, e *e2e.E) {
		out, errOut, code := e.Ralph("run", "--no-tui", "--sandbox", "landlock").In(e.Dir).Run()
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		runs, errOut, code := e.Ralph("runs").In(e.Dir).Run()
		if code != 0 || !strings.Contains(runs, "done") {
			t.Errorf("ralph runs without --sandbox: exit %d, want the run listed done:\n%s\n%s", code, runs, errOut)
		}
		if _, err := os.Stat(filepath.Join(e.Dir, ".ralph")); err == nil {
			t.Errorf("a store was made in the workdir")
		}
	}})
