package governance

import (
	"slices"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/rtfs"
)

func TestAgentAllow(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		c      Constitution
		src    string
		reason string // "" means admitted
	}{
		{"the configured cli", Constitution{AgentAllow: []string{"claude"}, AgentCLI: "claude"},
			`(call :agent.run {:prompt "fix it"})`, ""},
		{"a named cli that is allowed", Constitution{AgentAllow: []string{"claude", "codex"}, AgentCLI: "claude"},
			`(call :agent.run {:prompt "fix it" :cli "codex"})`, ""},
		{"a named cli that is not", Constitution{AgentAllow: []string{"claude"}, AgentCLI: "claude"},
			`(call :agent.run {:prompt "fix it" :cli "codex"})`, `plan.rtfs:1:1: agent CLI "codex" is not in [governance].agent_allow [claude]; add it there to permit it`},
		{"the configured cli is not allowed", Constitution{AgentAllow: []string{"codex"}, AgentCLI: "claude"},
			`(call :agent.run {:prompt "fix it"})`, `agent CLI "claude" is not in [governance].agent_allow [codex]`},
		{"no agent_allow at all", Constitution{},
			`(do (step "A" (call :agent.run {:prompt "fix it"})))`, `[governance].agent_allow is empty; add an [agent] section`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := kernel(t, tc.c)
			d := admit(t, k, tc.src)
			if tc.reason == "" {
				if !d.Allowed {
					t.Fatalf("refused: %v", d.Reasons)
				}
			} else if d.Allowed || !slices.Contains(d.RuleIDs, RuleAgentAllow) || !strings.Contains(strings.Join(d.Reasons, "; "), tc.reason) {
				t.Fatalf("admission: allowed %v rules %v reasons %q; want refused by %s with %q", d.Allowed, d.RuleIDs, d.Reasons, RuleAgentAllow, tc.reason)
			}
			// The same verdict at call time, for a call whose input admission could not see.
			input := rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("prompt"), rtfs.String("fix it")))
			if strings.Contains(tc.src, `:cli "codex"`) {
				input = rtfs.MapValue(input.AsMap().Assoc(rtfs.Keyword("cli"), rtfs.String("codex")))
			}
			cd := k.CheckCall("agent.run", input)
			if cd.Allowed != (tc.reason == "") {
				t.Errorf("CheckCall allowed = %v, want %v (%v)", cd.Allowed, tc.reason == "", cd.Reasons)
			}
			if k.Permits("agent.run") != (len(tc.c.AgentAllow) > 0) {
				t.Errorf("Permits(agent.run) = %v with agent_allow %v: the model's inventory must leave it out when no CLI is allowed", k.Permits("agent.run"), tc.c.AgentAllow)
			}
		})
	}
}
