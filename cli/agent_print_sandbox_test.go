package cli

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/sandbox"
)

// A refusal of the run's sandbox is printed like a permission denial,
// with the [sandbox] line that allows it; --json gives both fields.
func TestPrinterSandboxRefusal(t *testing.T) {
	now := time.Date(2026, 11, 25, 21, 0, 0, 0, time.Local)
	d := sandbox.HostDenial("evil.example", 443)
	ev := loop.Event{Kind: loop.EventAgent, Time: now, Iteration: 2, Agent: &agent.Event{Kind: agent.EventSandboxDenied, Refusal: &d}}
	want := "21:00:00 it 2   agent ! sandbox refused connect evil.example:443; to allow it, add hosts = [\"evil.example\"] to [sandbox]\n"
	if got := printed(t, false, ev); got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(printed(t, true, ev)), &m); err != nil {
		t.Fatal(err)
	}
	r, _ := m["sandbox_denied"].(map[string]any)
	if m["kind"] != "sandbox-denied" || r["what"] != d.What || r["allow"] != d.Allow {
		t.Errorf("--json refusal: %v", m)
	}
}
