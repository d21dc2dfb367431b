package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// A file or directory the config names that is missing is refused before
// the run starts: one sentence with the config's file:line and the fix,
// exit 2, and no store created for a run that never began.
var _ = suite.Add(e2e.Test{Name: "MissingConfigPaths", Run: func(t *testing.T, e *e2e.E) {
	const stop = "[[stop]]\nkind = \"max_iterations\"\nmax = 1\n"
	cases := []struct {
		name, toml, want string
	}{
		{"prompt_file", "[intent]\nprompt_file = \"NOPE.md\"\n[plan]\nrtfs = \"(do 1)\"\n" + stop,
			"ralph.toml:2: intent.prompt_file %s/NOPE.md does not exist; create it or fix the path"},
		{"plan file", "[plan]\nfile = \"plan.rtfs\"\n" + stop,
			"ralph.toml:2: plan.file %s/plan.rtfs does not exist; create it or fix the path"},
		{"script", "[model]\nprovider = \"script\"\nscript = \"answers.jsonl\"\n" + stop,
			"ralph.toml:3: model.script %s/answers.jsonl does not exist; create it or fix the path"},
		{"workdir", "[plan]\nrtfs = \"(do 1)\"\n[loop]\nworkdir = \"work\"\n" + stop,
			"ralph.toml:4: loop.workdir %s/work does not exist; create it or fix the path"},
		{"workdir is a file", "[plan]\nrtfs = \"(do 1)\"\n[loop]\nworkdir = \"ralph.toml\"\n" + stop,
			"ralph.toml:4: loop.workdir %s/ralph.toml is not a directory; fix the path"},
		{"agent command", "[model]\nprovider = \"command\"\ncommand = [\"./agent.sh\"]\n" + stop,
			"ralph.toml:3: command %s/agent.sh was not found: install it or fix model.command"},
		{"bad script line", "[model]\nprovider = \"script\"\nscript = \"answers.jsonl\"\n" + stop,
			"answers.jsonl:2: each line must be a JSON string or {\"content\": …, \"prompt_tokens\": n, \"completion_tokens\": m}: invalid character 'o' in literal null (expecting 'u')"},
		{"prompt_file is a directory", "[intent]\nprompt_file = \".\"\n[plan]\nrtfs = \"(do 1)\"\n" + stop,
			"ralph.toml:2: intent.prompt_file %s is a directory, not a file; fix the path"},
	}
	for _, tc := range cases {
		e.Run(tc.name, func(t *testing.T, e *e2e.E) {
			t.Parallel()
			dir := t.TempDir()
			cfg := filepath.Join(dir, "ralph.toml")
			writeFile(t, cfg, tc.toml)
			if tc.name == "bad script line" {
				writeFile(t, filepath.Join(dir, "answers.jsonl"), "\"(do 1)\"\nnot json\n")
			}
			_, errOut, code := e.Ralph("run", cfg, "--no-tui").Run()
			want := "ralph: " + dir + "/" + strings.Replace(tc.want, "%s", dir, 1) + "\n"
			if code != 2 || errOut != want {
				t.Errorf("exit %d, stderr\n%q\nwant exit 2 and\n%q", code, errOut, want)
			}
			if _, err := os.Stat(filepath.Join(dir, ".ralph")); !os.IsNotExist(err) {
				t.Errorf("a run that never started created its store (%v)", err)
			}
		})
	}
}})

// A --store that cannot be used (a file, a directory that is not a ralph
// store, a store another process has open) is bad input: exit 2, one
// sentence with the fix, like a --store that does not exist (a reading
// command reads a store another ralph holds through its socket). Exit 1 means
// a run failed or a chain did not verify.
var _ = suite.Add(e2e.Test{Name: "UnusableStoreIsUsageError", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	file := filepath.Join(dir, "afile")
	writeFile(t, file, "x")
	foreign := filepath.Join(dir, "foreign")
	if err := os.MkdirAll(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(foreign, "notes.txt"), "mine")
	cfg := filepath.Join(dir, "ralph.toml")
	writeFile(t, cfg, "[plan]\nrtfs = '(step \"Echo\" (call :ccos.echo {:message \"x\"}))'\n[loop]\ndelay = \"1m\"\n[[stop]]\nkind = \"max_iterations\"\nmax = 2\n")
	busy := filepath.Join(dir, "busy")
	cmd := e.Ralph("run", cfg, "--no-tui", "--store", busy).Start()
	cmd.WaitLine("IterationCompleted iteration 1")

	cases := []struct {
		args []string
		want string
	}{
		{[]string{"runs", "--store", file}, "is a file, not a directory"},
		{[]string{"chain", "verify", "--store", file}, "is a file, not a directory"},
		{[]string{"run", cfg, "--no-tui", "--store", file}, "is a file, not a directory"},
		{[]string{"run", cfg, "--no-tui", "--store", foreign}, "is not a ralph ledger store"},
		{[]string{"chain", "import", "--store", busy}, "is in use by process"}, // reading commands go through its socket
		{[]string{"run", cfg, "--no-tui", "--store", busy}, "is in use by process"},
	}
	for _, tc := range cases {
		_, errOut, code := e.Ralph(tc.args...).Run()
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("ralph %q: exit %d, stderr %q; want exit 2 and one line saying %q", tc.args, code, errOut, tc.want)
		}
	}
}})
