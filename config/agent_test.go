package config

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
)

func TestAgentSection(t *testing.T) {
	t.Parallel()
	src := `[intent]
prompt_file = "PROMPT.md"
[agent]
cli = "claude"
args = ["--model", "o4"]
idle_timeout = "0s"
[agent.price]
input = 3.0
cache_read = 0.3
[[stop]]
kind = "max_iterations"
max = 7
[[stop]]
kind = "max_iterations"
max = 5
`
	c, err := Parse([]byte(src), "/tmp/x/ralph.toml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	a := c.Agent
	switch {
	case c.Model.Provider != "agent":
		t.Errorf("provider = %q, want agent ([agent] and no [plan])", c.Model.Provider)
	case a.CLI != "claude" || len(a.Args) != 2 || a.Timeout.Duration != 30*time.Minute || a.IdleTimeout.Duration != 0:
		t.Errorf("agent = %+v: want codex, 2 args, the 30m default timeout and the idle timeout written as 0s", a)
	case a.Price == nil || a.Price.Input != 3 || a.Price.CacheRead != 0.3:
		t.Errorf("price = %+v", a.Price)
	case len(c.Governance.AgentAllow) != 1 || c.Governance.AgentAllow[0] != "claude":
		t.Errorf("agent_allow = %v, want [claude] by default", c.Governance.AgentAllow)
	case c.AgentPromptFile() != filepath.Join("/tmp/x", "PROMPT.md"):
		t.Errorf("prompt file = %q, want [intent].prompt_file", c.AgentPromptFile())
	}
	// The snapshot a resumed run reads back keeps all of it.
	back, err := Parse([]byte(c.Snapshot()), "snapshot", noEnv)
	if err != nil {
		t.Fatalf("snapshot does not parse: %v\n%s", err, c.Snapshot())
	}
	if back.Model.Provider != "agent" || back.Agent.CLI != "claude" || back.Agent.IdleTimeout.Duration != 0 || back.Agent.Price.Input != 3 {
		t.Errorf("snapshot lost the agent: %+v %+v", back.Model, back.Agent)
	}
}

func TestAgentWithPlanIsStatic(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("[agent]\ncli = \"claude\"\n[plan]\nrtfs = '(call :agent.run {:prompt \"x\"})'\n"), "ralph.toml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Model.Provider != "static" || c.Agent.CLI != "claude" {
		t.Errorf("provider %q cli %q: a [plan] stays static and may call agent.run itself", c.Model.Provider, c.Agent.CLI)
	}
}

func TestAgentConfigErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, src, want string }{
		{"unknown key", "[agent]\ncli = \"claude\"\nmodel = \"opus\"\n", "ralph.toml:3: unknown key agent.model"},
		{"unknown price key", "[agent]\ncli = \"claude\"\n[agent.price]\nin = 3.0\n", "ralph.toml:4: unknown key agent.price.in"},
		{"unknown cli", "[intent]\ngoal = \"g\"\n[agent]\ncli = \"claud\"\n", `ralph.toml:4: agent.cli "claud" is not a known agent CLI; use one of auto, claude`},
		{"command without argv", "[intent]\ngoal = \"g\"\n[agent]\ncli = \"command\"\n", `ralph.toml:4: cli = "command" needs agent.command`},
		{"command for another cli", "[agent]\ncli = \"claude\"\ncommand = [\"x\"]\n", `ralph.toml:3: agent.command applies only to cli = "command"`},
		{"no prompt", "[agent]\ncli = \"claude\"\n", "the agent loop has no prompt; set [agent].prompt_file or [intent].prompt_file"},
		{"agent provider without agent", "[model]\nprovider = \"agent\"\n", `ralph.toml:2: provider "agent" needs an [agent] section`},
		{"unknown allow", "[governance]\nagent_allow = [\"claude\", \"cursor\"]\n[plan]\nrtfs = \"1\"\n", `ralph.toml:2: governance.agent_allow names "cursor", which is not a known agent CLI`},
		{"loop cli not allowed", "[intent]\ngoal = \"g\"\n[agent]\ncli = \"claude\"\n[governance]\nagent_allow = [\"command\"]\n", `ralph.toml:6: the agent loop runs cli "claude", which governance.agent_allow ["command"] does not list, so every iteration would be refused; add it`},
		{"negative price", "[intent]\ngoal = \"g\"\n[agent]\ncli = \"claude\"\n[agent.price]\ninput = -1.0\n", "ralph.toml:5: [agent.price] must not be negative"},
		{"bad timeout", "[agent]\ncli = \"claude\"\ntimeout = \"soon\"\n", `"soon" is not a duration`},
		{"wrong type", "[agent]\ncli = \"claude\"\nargs = \"--yes\"\n", `ralph.toml:3: agent.args must be a list of strings`},
		{"env name", "[intent]\ngoal = \"g\"\n[agent]\ncli = \"claude\"\n[agent.env]\n\"1X\" = \"y\"\n", `ralph.toml:6: [agent.env] name "1X" is not a variable name`},
		{"env secret", "[intent]\ngoal = \"g\"\n[agent]\ncli = \"claude\"\n[agent.env]\nANTHROPIC_API_KEY = \"sk\"\n", `ralph.toml:6: [agent.env] ANTHROPIC_API_KEY looks like a credential`},
		{"env type", "[intent]\ngoal = \"g\"\n[agent]\ncli = \"claude\"\n[agent.env]\nX = 1\n", `ralph.toml:6: agent.env.X must be a string`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.src), "ralph.toml", noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestAgentStarterLoads(t *testing.T) {
	t.Parallel()
	for _, cli := range InitAgents() {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeTestFile(t, filepath.Join(dir, ".gitignore"), "bin/")
			files, err := WriteAgentStarter(dir, AgentStarter{CLI: cli, Test: []string{"go", "test", "./..."}})
			if err != nil || len(files) != 3 {
				t.Fatal(files, err)
			}
			c, err := Load(filepath.Join(dir, "ralph.toml"), noEnv)
			if err != nil {
				t.Fatal(err)
			}
			if c.Model.Provider != "agent" || c.Agent.CLI != cli {
				t.Errorf("provider %q cli %q", c.Model.Provider, c.Agent.CLI)
			}
			if c.SandboxMode() != "auto" {
				t.Errorf("init wrote [sandbox] mode %q, want auto", c.SandboxMode())
			}
			if text, _ := os.ReadFile(filepath.Join(dir, "ralph.toml")); !strings.Contains(string(text), "package registries are reachable only when\n# listed in hosts") {
				t.Errorf("init's [sandbox] does not say the registries need hosts:\n%s", text)
			}
			kinds := map[string]bool{}
			for _, s := range c.Stop {
				kinds[s.Kind] = true
				if s.Kind == "max_iterations" && s.Max != 20 {
					t.Errorf("init bounds the loop at %d iterations, want 20", s.Max)
				}
				if s.Kind == "command" && (s.MustMatch == "" || s.MustNotMatch == "") {
					t.Errorf("the tests condition must refuse \"no tests ran\": %+v", s)
				}
			}
			for _, k := range []string{"command", "max_iterations", "max_cost", "no_progress"} {
				if !kinds[k] {
					t.Errorf("no %s condition", k)
				}
			}
			p := agent.PermissionsFor(cli, []string{"go", "test", "./..."}, false)
			if m := agent.InitModel(cli); m != "" {
				p.Args = append(p.Args, "--model", m)
			}
			if !slices.Equal(c.Agent.Args, p.Args) || !slices.Equal(c.Agent.EnvList(), p.Env) {
				t.Errorf("init wrote args %q env %q, want the backend's permissions %q %q", c.Agent.Args, c.Agent.EnvList(), p.Args, p.Env)
			}
			if gi := readTestFile(t, filepath.Join(dir, ".gitignore")); gi != "bin/\n.ralph/\n" {
				t.Errorf(".gitignore = %q", gi)
			}
			if _, err := WriteAgentStarter(dir, AgentStarter{CLI: cli}); err == nil || !strings.Contains(err.Error(), "already exists") {
				t.Errorf("second init: %v", err)
			}
		})
	}
	if _, err := WriteAgentStarter(t.TempDir(), AgentStarter{CLI: "cursor"}); err == nil || !strings.Contains(err.Error(), "use one of claude") {
		t.Errorf("unknown agent: %v", err)
	}
}

func TestAgentStarterFullAccess(t *testing.T) {
	t.Parallel()
	for _, cli := range InitAgents() {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			text := AgentStarter{CLI: cli, Test: []string{"go", "test", "./..."}, FullAccess: true}.Text()
			if !strings.Contains(text, "# WARNING: full access") {
				t.Errorf("no warning:\n%s", text)
			}
			c, err := Parse([]byte(text), "ralph.toml", noEnv)
			if err != nil {
				t.Fatal(err)
			}
			p := agent.PermissionsFor(cli, []string{"go", "test", "./..."}, true)
			if m := agent.InitModel(cli); m != "" {
				p.Args = append(p.Args, "--model", m)
			}
			if !slices.Equal(c.Agent.Args, p.Args) || !slices.Equal(c.Agent.EnvList(), p.Env) {
				t.Errorf("--full-access wrote args %q env %q, want %q %q", c.Agent.Args, c.Agent.EnvList(), p.Args, p.Env)
			}
		})
	}
}

func TestSplitCommand(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`go test ./...`:                  "go|test|./...",
		`pytest -k "not slow" -q`:        "pytest|-k|not slow|-q",
		`  cargo   test  `:               "cargo|test",
		`sh -c 'make check'`:             "sh|-c|make check",
		`npm run test -- --runInBand=""`: "npm|run|test|--|--runInBand=",
	} {
		got, err := SplitCommand(in)
		if err != nil || strings.Join(got, "|") != want {
			t.Errorf("SplitCommand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "   ", `go test "./...`} {
		if _, err := SplitCommand(bad); err == nil {
			t.Errorf("SplitCommand(%q) accepted", bad)
		}
	}
}

func TestTestPatternsRefuseNoTests(t *testing.T) {
	t.Parallel()
	goP := patternsFor([]string{"go", "test", "./..."})
	for out, green := range map[string]bool{
		"ok  \texample.com/calc\t0.003s\n":                             true,
		"?   \texample.com/calc\t[no test files]\n":                    false,
		"ok  \texample.com/calc\t0.001s [no tests to run]\n":           false,
		"--- FAIL: TestAdd (0.00s)\nFAIL\nok  \texample.com/b\t0.1s\n": false,
	} {
		if got := matches(t, goP, out); got != green {
			t.Errorf("go test output %q: green = %v, want %v", out, got, green)
		}
	}
	generic := patternsFor([]string{"npm", "test"})
	if matches(t, generic, "No tests found, exiting with code 1\n") || !matches(t, generic, "Tests: 4 passed\n") {
		t.Error("the generic patterns must refuse \"no tests found\" and accept a pass")
	}
}

func matches(t *testing.T, p testPatterns, out string) bool {
	t.Helper()
	if p.must != "" && !regexp.MustCompile(p.must).MatchString(out) {
		return false
	}
	return p.mustNot == "" || !regexp.MustCompile(p.mustNot).MatchString(out)
}

func writeTestFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readTestFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzSplitCommand: any --test text either splits into non-empty argv or is
// refused with an error; it never panics.
func FuzzSplitCommand(f *testing.F) {
	for _, s := range []string{`go test ./...`, `pytest -k "not slow"`, `sh -c 'a b'`, `"`, ``, `a  b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		argv, err := SplitCommand(s)
		if err == nil && len(argv) == 0 {
			t.Fatalf("SplitCommand(%q) = no argv and no error", s)
		}
	})
}

func TestGuessTest(t *testing.T) {
	t.Parallel()
	for marker, want := range map[string]string{"go.mod": "go test ./...", "Cargo.toml": "cargo test",
		"pyproject.toml": "python -m pytest -q", "package.json": "npm test", "": "go test ./..."} {
		dir := t.TempDir()
		if marker != "" {
			writeTestFile(t, filepath.Join(dir, marker), "")
		}
		if got := strings.Join(guessTest(dir), " "); got != want {
			t.Errorf("a project with %q: test command %q, want %q", marker, got, want)
		}
	}
}
