package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bad --policy file stops the worker before it connects: one sentence
// naming file:line, exit 2.
func TestWorkerPolicyFileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"unknown.toml": "[governance]\nshell_allow = [\"go\"]\nshel_allow = [\"sh\"]\n",
		"type.toml":    "[governance]\n\nmax_iterations = \"ten\"\n",
		"value.toml":   "[governance]\nmax_cost_usd = 0.0\n",
		"sandbox.toml": "[governance]\nsandbox = \"jail\"\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct{ file, want string }{
		{"unknown.toml", "unknown.toml:3: unknown key governance.shel_allow; a worker policy has one [governance] table with allow, deny, shell_allow, agent_allow, max_cost_usd, max_iterations, max_steps, workspaces, hosts, env_allow and sandbox"},
		{"type.toml", "type.toml:3: governance.max_iterations must be an integer, not a string"},
		{"value.toml", "value.toml:2: governance.max_cost_usd must be more than 0, got 0; leave it out for no cost ceiling"},
		{"sandbox.toml", `sandbox.toml:2:11: governance.sandbox: sandbox mode "jail" is not one of off, auto, landlock or bwrap; leave it out to require none`},
		{"missing.toml", "missing.toml does not exist; write one with a [governance] table"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			// An unreachable NATS: the policy is read first, so its error is the one reported.
			_, errOut, code := run(t, context.Background(), "", "worker", "--policy", filepath.Join(dir, c.file), "--nats", "nats://127.0.0.1:1", "--dir", t.TempDir())
			if code != 2 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Errorf("exit %d, stderr %q; want 2 and one line with %q", code, errOut, c.want)
			}
		})
	}
}
