package agent

import (
	"strings"
	"testing"
)

// A recorded claude stream replays as the events it streamed.
func TestParseOutputReplaysClaude(t *testing.T) {
	t.Parallel()
	out := `{"type":"system","subtype":"init","session_id":"s1","model":"claude-sonnet-4-5"}
{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Working on it."}],"usage":{"input_tokens":10,"output_tokens":5}}}
{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"t1","name":"Edit","input":{"file_path":"a.go"}}]}}
not json
`
	var kinds []EventKind
	var text []string
	err := ParseOutput("claude", strings.NewReader(out), func(e Event) {
		kinds = append(kinds, e.Kind)
		text = append(text, e.Text+e.Tool)
	})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(text, "|")
	for _, want := range []string{"Working on it.", "Edit", "not json"} {
		if !strings.Contains(joined, want) {
			t.Errorf("replay lacks %q: %q (kinds %v)", want, joined, kinds)
		}
	}
	if err := ParseOutput("nope", strings.NewReader(out), func(Event) {}); err == nil {
		t.Error("an unknown CLI replays")
	}
}
