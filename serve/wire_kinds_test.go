package serve

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/loop"
)

// Every event kind loop publishes crosses the socket, the agent's stream
// and the delay countdown included.
func TestEveryEventKindCrossesTheWire(t *testing.T) {
	t.Parallel()
	until := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, e := range []loop.Event{
		{Kind: loop.EventDelay, Until: until, Text: "[loop].delay 5s before iteration 2", Iteration: 1},
		{Kind: loop.EventAgent, Agent: &agent.Event{Kind: agent.EventToolUse, Tool: "Bash", Input: "go test ./..."}, CallID: "call-1"},
		{Kind: loop.EventAgent, Agent: &agent.Event{Kind: agent.EventProgress, Tool: "Bash", ToolID: "toolu_1", Text: "Bash running for 30s"}},
		{Kind: loop.EventWait, Until: until, Text: "usage limit"},
	} {
		b, err := json.Marshal(toWire(&e))
		if err != nil {
			t.Fatal(err)
		}
		got, err := fromWire(b)
		if err != nil {
			t.Fatalf("%s: %v", e.Kind, err)
		}
		if got.Kind != e.Kind || !got.Until.Equal(e.Until) || got.Text != e.Text || got.CallID != e.CallID ||
			(e.Agent != nil && (got.Agent == nil || !reflect.DeepEqual(*got.Agent, *e.Agent))) {
			t.Errorf("%s came back as %+v", e.Kind, got)
		}
	}
}
