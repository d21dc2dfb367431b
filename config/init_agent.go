package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/agent"
)

// InitAgents are the CLIs `ralph init --agent` writes a loop for: every
// agent backend but "auto" and "command".
func InitAgents() []string { return agent.CLIs() }

// AgentStarter is what `ralph init --agent` writes.
type AgentStarter struct {
	CLI  string   // one of InitAgents
	Test []string // the test command; nil: guessed from the project in the directory
	// FullAccess writes the CLI's bypass of every permission check instead
	// of the flags that allow edits in the workspace and the test command.
	FullAccess bool
}

// testPatterns are must_match and must_not_match for a test command, so
// that "no tests ran" is never green.
type testPatterns struct{ must, mustNot string }

// patternsFor picks the patterns for the test runner argv names.
func patternsFor(argv []string) testPatterns {
	line := " " + strings.Join(argv, " ") + " "
	switch {
	case strings.Contains(line, " go test "):
		// at least one package passed; none failed; a -run that matched nothing is not green
		return testPatterns{must: `(?m)^ok\s`, mustNot: `(?m)^(FAIL|---\s+FAIL)|\[no tests to run\]`}
	case strings.Contains(line, "cargo test"):
		return testPatterns{must: `test result: ok\. [1-9][0-9]* passed`, mustNot: `test result: FAILED`}
	case strings.Contains(line, "pytest"):
		return testPatterns{must: `[1-9][0-9]* passed`, mustNot: `(?i)no tests ran|[1-9][0-9]* (failed|errors?)\b`}
	}
	return testPatterns{mustNot: `(?i)\bno tests? (were )?(found|ran|run|to run)\b|\b0 tests\b`}
}

// guessTest is the test command for the project in dir.
func guessTest(dir string) []string {
	has := func(name string) bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil }
	switch {
	case has("go.mod"):
		return []string{"go", "test", "./..."}
	case has("Cargo.toml"):
		return []string{"cargo", "test"}
	case has("pyproject.toml") || has("setup.py") || has("pytest.ini"):
		return []string{"python", "-m", "pytest", "-q"}
	case has("package.json"):
		return []string{"npm", "test"}
	}
	return []string{"go", "test", "./..."}
}

// SplitCommand splits a command line into argv: words separated by spaces,
// with '…' and "…" quoting (no other shell syntax: ralph runs it without a
// shell).
func SplitCommand(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("the command %q has an unclosed %c quote; close it", s, quote)
	}
	if inWord {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, errors.New("the test command is empty; pass one such as --test \"go test ./...\"")
	}
	return out, nil
}

// tomlList writes argv as a TOML array of basic strings.
func tomlList(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.Quote(a)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// tomlLiteral writes s as a TOML literal string ('…'), or a basic string
// when s holds a quote.
func tomlLiteral(s string) string {
	if strings.ContainsAny(s, "'\n") {
		return strconv.Quote(s)
	}
	return "'" + s + "'"
}

// Text is the ralph.toml of the agent loop.
func (s AgentStarter) Text() string {
	p := patternsFor(s.Test)
	var b strings.Builder
	fmt.Fprintf(&b, `# ralph.toml — an agent loop: run %[1]s on PROMPT.md, then the tests, again and again,
# until the tests are really green, the agent is stuck, or the budget runs out.
# ralph adds a feedback block to the prompt each time: the iteration, how the last one
# ended, and the tail of the failing test output (docs/agents.md). Paths are relative
# to this file; unknown keys are errors.

[intent]
goal = "Make the tests pass"
prompt_file = "PROMPT.md"

[agent]
%-37[2]s # claude | codex | gemini | opencode | command | auto
%[4]stimeout = "30m"                       # one agent call, start to end
idle_timeout = "5m"                   # no output for this long kills the agent's processes
# max_rate_limit_wait = "6h"          # a usage-limit wait longer than this ends the run
# [agent.price]                       # USD per million tokens, for a CLI that reports no cost
# input = 3.0
# output = 15.0
# cache_read = 0.3
# cache_write = 3.75
%[5]s
[loop]
workdir = "."
# checkpoints = true                  # in a git work tree, a commit of the workdir after each iteration on
#                                     # refs/ralph/<run>/<n>: ralph diff, rollback and replay read them

# Green means green: the test command passes, and "no tests ran" is not a pass.
[[stop]]
name = "tests"
kind = "command"
cmd = %[3]s
`, s.CLI, fmt.Sprintf("cli = %q", s.CLI), tomlList(s.Test), s.permissionArgs(), s.permissionEnv())
	if p.must != "" {
		fmt.Fprintf(&b, "must_match = %s\n", tomlLiteral(p.must))
	}
	if p.mustNot != "" {
		fmt.Fprintf(&b, "must_not_match = %s\n", tomlLiteral(p.mustNot))
	}
	b.WriteString(`timeout = "10m"
class = "success"

[[stop]]
name = "iterations"
kind = "max_iterations"
max = 20

[[stop]]
name = "budget"
kind = "max_cost"
usd = 10.0                            # the agent's spend, as the CLI reports it

[[stop]]
name = "stuck"
kind = "no_progress"
iterations = 3                        # the workspace and the tests' verdict unchanged 3 times

[[stop]]
name = "broken"
kind = "consecutive_failures"
count = 3                             # the agent itself failed 3 times in a row (login, API key)

`)
	b.WriteString(sandboxAndStoreStarter)
	return b.String()
}

// sandboxAndStoreStarter ends the agent loop's ralph.toml: its
// [sandbox], on (DESIGN §22), and its [store].
const sandboxAndStoreStarter = `# The agent and every command the loop runs (tests, hooks, stop checks, notify) are
# confined: they write the workdir and the agent's own state, read the system and the
# toolchains, never see ralph's store and keys or ~/.ssh, ~/.aws, and reach only the
# model's hosts. The Go module proxy and package registries are reachable only when
# listed in hosts. mode = "off" runs them unconfined (docs/sandbox.md).
[sandbox]
mode = "auto"                         # auto | landlock | bwrap | off
# network = "model"                   # model (the agent's API hosts) | none | all
# hosts = ["proxy.golang.org", "registry.npmjs.org"]
# read = []                           # more read-only paths
# write = []                          # more read-write paths
# hide = []                           # more paths never visible

[store]
dir = ".ralph"
sync_writes = true
`

// permissionArgs is the [agent] args line with the comment saying what it
// allows: the CLI's flags for editing in the workspace and running the
// test command headless, or with FullAccess its bypass and a warning.
func (s AgentStarter) permissionArgs() string {
	p := agent.PermissionsFor(s.CLI, s.Test, s.FullAccess)
	var b strings.Builder
	if s.FullAccess {
		fmt.Fprintf(&b, "# WARNING: full access (ralph init --full-access). %s may run any command and\n", s.CLI)
		b.WriteString("# change any file this user can, with no prompt and no sandbox. Use it only in a\n")
		b.WriteString("# throwaway container or VM; without --full-access init writes narrower flags.\n")
	} else if len(p.Args) > 0 || len(p.Env) > 0 {
		fmt.Fprintf(&b, "# What lets %s work unattended: edit files in this directory and run the\n", s.CLI)
		b.WriteString("# test command, nothing more (docs/agents.md, Permissions). Without them its\n")
		b.WriteString("# edits are refused and ralph stops the run with \"permission denied\".\n")
	}
	for _, c := range p.Comment {
		b.WriteString("# " + c + "\n")
	}
	if m := agent.InitModel(s.CLI); m != "" && agent.ArgsModel(p.Args) == "" {
		fmt.Fprintf(&b, "# --model %s: %s reports tokens, not dollars, and picks its default model at run\n", m, s.CLI)
		b.WriteString("# time; max_cost prices the tokens of the model named here. Change it to yours,\n")
		b.WriteString("# and set [agent.price] below if ralph's price table does not know it.\n")
		p.Args = append(p.Args, "--model", m)
	}
	if len(p.Args) == 0 {
		b.WriteString("# args = []                           # extra arguments for the CLI\n")
		return b.String()
	}
	b.WriteString("args = " + tomlList(p.Args) + "\n")
	return b.String()
}

// permissionEnv is the [agent.env] table the CLI's permissions need (""
// when they need none).
func (s AgentStarter) permissionEnv() string {
	p := agent.PermissionsFor(s.CLI, s.Test, s.FullAccess)
	if len(p.Env) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n# Variables set for %s's process (its permissions live in its environment).\n[agent.env]\n", s.CLI)
	for _, kv := range p.Env {
		name, value, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "%s = %s\n", name, tomlLiteral(value))
	}
	return b.String()
}

// AgentPrompt is the PROMPT.md `ralph init --agent` writes.
const AgentPrompt = `# Task

Make the tests pass. Find the cause of each failure in the code (not in the
tests) and fix it with small, focused changes.

After you finish, ralph runs the tests. When they fail, the next prompt ends
with a "ralph feedback" section holding the tail of the failing output: start
from there.
`

// WriteAgentStarter writes the agent loop into dir: ralph.toml, PROMPT.md
// (both refused when they exist) and .ralph/ added to .gitignore.
func WriteAgentStarter(dir string, s AgentStarter) ([]string, error) {
	if !slices.Contains(InitAgents(), s.CLI) {
		return nil, fmt.Errorf("--agent %q is not an agent ralph init knows; use one of %s", s.CLI, strings.Join(InitAgents(), ", "))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if s.Test == nil {
		s.Test = guessTest(dir)
	}
	written, err := writeNew(dir, []starterFile{{"ralph.toml", s.Text()}, {"PROMPT.md", AgentPrompt}})
	if err != nil {
		return written, err
	}
	gi, err := ignoreStore(dir)
	if err != nil {
		return written, err
	}
	if gi != "" {
		written = append(written, gi)
	}
	return written, nil
}

// ignoreStore adds .ralph/ to dir's .gitignore (creating it), unless a
// line already ignores it; it returns the file when it changed it.
func ignoreStore(dir string) (string, error) {
	p := filepath.Join(dir, ".gitignore")
	old, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	for _, l := range strings.Split(string(old), "\n") {
		switch strings.TrimSpace(l) {
		case ".ralph", ".ralph/", "/.ralph", "/.ralph/":
			return "", nil
		}
	}
	var b bytes.Buffer
	b.Write(old)
	if len(old) > 0 && !bytes.HasSuffix(old, []byte("\n")) {
		b.WriteByte('\n')
	}
	b.WriteString(".ralph/\n")
	return p, os.WriteFile(p, b.Bytes(), 0o644)
}
