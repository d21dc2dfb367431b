package mockmodel

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// sseEvent is one server-sent event: its name and its JSON data.
type sseEvent struct {
	name string
	data map[string]any
}

// readSSE reads a stream of named events whose JSON data carries its own
// name as "type" (the Anthropic and OpenAI streams both do): any other
// event fails the test.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var evs []sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<24)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("event %s: data %q: %v", name, line, err)
			}
			if d["type"] != name {
				t.Fatalf("event %s carries type %v", name, d["type"])
			}
			evs = append(evs, sseEvent{name, d})
		}
	}
	return evs // a stream cut short (a hang past the client's deadline) is what was read
}
