package arbiter

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/agent"
)

// agentAnswerer is a model that may be a coding agent rather than a
// planner: a command such as `claude -p` reads the prompt, does the work
// itself and answers in prose. Its answers are not plans, and every repair
// asks it to do the work again.
type agentAnswerer interface {
	// agentConfig names the program as a user would type it, and the
	// [agent] setting that runs it.
	agentConfig() (shown, config string)
}

func (m *commandModel) agentConfig() (shown, config string) {
	// The coding agents ralph runs itself with [agent] (DESIGN §12); any
	// other program runs there as cli = "command".
	if prog := filepath.Base(m.argv[0]); agent.IsCLI(prog) {
		return m.shown(), fmt.Sprintf("[agent] cli = %q", prog)
	}
	return m.shown(), `[agent] cli = "command"`
}

// proseAnswers is how many answers in a row without any plan end plan
// generation for an agentAnswerer: the first, and one repair that asks for
// a plan alone (or only the first when [model].max_repairs is 0).
const proseAnswers = 2

// agentAnswers ends plan generation when the model is an agentAnswerer
// whose last answers held no plan at all: repairing, or falling back to
// Mode B, would only run the agent again. The error is ErrFatal: no later
// iteration can do better.
func (s *session) agentAnswers() error {
	a, ok := s.p.model.(agentAnswerer)
	if !ok || s.prose < min(proseAnswers, 1+s.p.opts.MaxRepairs) {
		return nil
	}
	shown, config := a.agentConfig()
	answers := "its answer holds"
	if s.prose > 1 {
		answers = fmt.Sprintf("its last %d answers hold", s.prose)
	}
	return &transportError{kind: ErrFatal, msg: fmt.Sprintf(
		"command %s is a coding agent, not a planner: %s no plan at all (no RTFS (do …) form, no JSON IR), only prose; run it with %s instead of [model] provider = \"command\"",
		shown, answers, config)}
}

// isPlanless reports whether an answer holds no plan at all, in either
// mode: no (do …) or (plan …) form, no step or call, no "steps" of JSON IR.
// Prose, a diff or markdown about code are planless; a broken plan is not.
func isPlanless(answer string) bool {
	s, _ := cleanAnswer(answer)
	return nextOpener(s, 0) < 0 && !holdsPlanForm(s) && !strings.Contains(s, `"steps"`)
}
