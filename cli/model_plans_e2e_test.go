package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// ModelPlans runs plans written the way models write them (CCOS's
// plan wrapper, qualified keys, loops, sets, #(…), case, match, println)
// through `ralph exec` with the real binary, each in a fresh workdir and
// store, and checks the action trace, the result and the exit status
// against cli/testdata/modelplans/NAME.trace (rewritten with -update).
var _ = suite.Add(e2e.Test{Name: "ModelPlans", Run: func(t *testing.T, e *e2e.E) {
	plans, err := filepath.Glob(filepath.Join("testdata", "modelplans", "*.rtfs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) < 20 {
		t.Fatalf("%d model plans, want at least 20", len(plans))
	}
	for _, plan := range plans {
		name := strings.TrimSuffix(filepath.Base(plan), ".rtfs")
		e.Run(name, func(t *testing.T, e *e2e.E) {
			t.Parallel()
			src, err := os.ReadFile(plan)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			cfg := filepath.Join(dir, "ralph.toml")
			writeFile(t, cfg, "[model]\nprovider = \"static\"\n[governance]\nshell_allow = [\"echo\"]\n[store]\ndir = \"store\"\n")
			writeFile(t, filepath.Join(dir, name+".rtfs"), string(src))
			out, errOut, code := e.Ralph("exec", filepath.Join(dir, name+".rtfs"), "--config", cfg).Run()
			got := traceOf(out, errOut, code, dir)
			golden := strings.TrimSuffix(plan, ".rtfs") + ".trace"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("trace of %s\n--- got\n%s--- want\n%s", name, got, want)
			}
		})
	}
}})

var (
	treeGlyphs = regexp.MustCompile(`^[│├└─ ]*`)
	actionSeq  = regexp.MustCompile(`^#\d+ `)
	durationMS = regexp.MustCompile(` \d+ms$`)
)

// traceOf is exec's output without what changes from run to run: seqs,
// durations and the temporary directory.
func traceOf(out, errOut string, code int, dir string) string {
	var b strings.Builder
	b.WriteString("exit " + string(rune('0'+code)) + "\n")
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		depth := len([]rune(treeGlyphs.FindString(line))) / 3
		line = treeGlyphs.ReplaceAllString(line, "")
		line = actionSeq.ReplaceAllString(line, "")
		line = durationMS.ReplaceAllString(line, "")
		b.WriteString(strings.Repeat("  ", depth) + line + "\n")
	}
	if errOut != "" {
		b.WriteString("stderr: " + strings.ReplaceAll(strings.TrimSpace(errOut), dir, "DIR") + "\n")
	}
	return b.String()
}

// Println: println, prn and log in a plan are InternalStep "log"
// actions holding the line; in ralph eval they go to stderr.
var _ = suite.Add(e2e.Test{Name: "Println", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ralph.toml")
	writeFile(t, cfg, "[model]\nprovider = \"static\"\n[store]\ndir = \"store\"\n")
	src, err := os.ReadFile(filepath.Join("testdata", "modelplans", "14-println-log.rtfs"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "p.rtfs"), string(src))
	if _, errOut, code := e.Ralph("exec", filepath.Join(dir, "p.rtfs"), "--config", cfg).Run(); code != 0 {
		t.Fatalf("exec: %d %s", code, errOut)
	}
	out, errOut, code := e.Ralph("chain", "show", "--json", "--store", filepath.Join(dir, "store")).Run()
	if code != 0 {
		t.Fatalf("chain show: %d %s", code, errOut)
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `"action_type":"InternalStep"`) && strings.Contains(l, `"function_name":"log"`) {
			lines = append(lines, l)
		}
	}
	want := []string{`"arguments":["starting work on 3 items"]`, `"arguments":["total is 6"]`, `"arguments":["{:total 6}"]`}
	if len(lines) != len(want) {
		t.Fatalf("%d log actions, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) || !strings.Contains(lines[i], `"position":"p.rtfs:`) {
			t.Errorf("log action %d = %s, want %s and its position", i, lines[i], w)
		}
	}
	out, errOut, code = e.Ralph("eval", "-e", `(do (println "to stderr" [1 "x"]) (prn "q") 5)`).Run()
	if code != 0 || out != "5\n" || errOut != "to stderr [1 \"x\"]\n\"q\"\n" {
		t.Errorf("eval: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}})
