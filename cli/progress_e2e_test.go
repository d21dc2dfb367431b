package cli_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// stuckLoop is a loop whose plan changes nothing while its "tests" print a
// fresh timing every time, as `go test` does; work is a shell command run
// each iteration (empty: none).
func stuckLoop(work string) string {
	return `[plan]
rtfs = '''
(do (step "Test" (call :shell.exec {:cmd "sh" :args ["-c" "` + work + `echo ok example.com/m 0.00$RANDOM s; exit 1"] :check false})))
'''
[[stop]]
name = "stuck"
kind = "no_progress"
iterations = 2
[[stop]]
name = "tests"
kind = "command"
cmd = ["sh", "-c", "echo FAIL example.com/m 0.0$RANDOM s; exit 1"]
[[stop]]
kind = "max_iterations"
max = 5
[governance]
shell_allow = ["sh"]
`
}

// A stuck loop in a git work tree stops on no_progress after exactly two
// unchanged iterations, every time, though its output differs each time;
// the same loop writing a file each iteration is progress and runs to its
// iteration limit.
var _ = suite.Add(e2e.Test{Name: "NoProgressSeesWorkNotTimings", Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	cases := []struct {
		name, work string
		code       int
		want       string
	}{
		{"stuck 1", "", 1, "failed after 3 iteration(s) ($0.0000, 0 tokens): failure by stuck — nothing changed for 2 iterations"},
		{"stuck 2", "", 1, "failed after 3 iteration(s) ($0.0000, 0 tokens): failure by stuck — nothing changed for 2 iterations"},
		{"stuck 3", "", 1, "failed after 3 iteration(s) ($0.0000, 0 tokens): failure by stuck — nothing changed for 2 iterations"},
		{"working", "date +%N >> progress.txt; ", 3, "stopped after 5 iteration(s)"},
	}
	for _, tc := range cases {
		e.Run(tc.name, func(t *testing.T, e *e2e.E) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "m.go"), "package m\n")
			writeFile(t, filepath.Join(dir, "ralph.toml"), stuckLoop(tc.work))
			if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
				t.Fatalf("git init: %v %s", err, out)
			}
			// XDG directories outside the workdir: what ralph keeps there is not the work either.
			out, errOut, code := e.Ralph("run", "--no-tui", filepath.Join(dir, "ralph.toml")).Run()
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want %d and %q\n%s\n%s", code, tc.code, tc.want, out, errOut)
			}
		})
	}
}})
