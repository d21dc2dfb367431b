package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/sandbox"
)

// A refusal of the run's sandbox shows in the agent's pane as an error
// line, like a permission denial, with the [sandbox] line that allows it.
func TestAgentOutputShowsSandboxRefusal(t *testing.T) {
	t.Parallel()
	p := newOutputPane(newStyles(&strings.Builder{}, 0), time.Now)
	d := sandbox.PathDenial(sandbox.OpRead, "/root/.aws/credentials")
	p.add("call-1", 1, time.Now(), &agent.Event{Kind: agent.EventSandboxDenied, Refusal: &d})
	v := p.Render(160, 6)
	if want := `sandbox refused read /root/.aws/credentials; to allow it, add read = ["/root/.aws/credentials"] to [sandbox]`; !strings.Contains(v, want) {
		t.Errorf("the pane lacks %q:\n%s", want, v)
	}
}
