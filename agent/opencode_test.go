package agent

// OpenCode's parser, permissions and standard error on the transcripts
// recorded from the real opencode-ai 1.18.33 (agent/conformance,
// TestOpencodeRecord) against internal/mockmodel.

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// realOpencode reads the recorded stdout (ext "jsonl") or stderr (ext
// "stderr") of case name.
func realOpencode(t testing.TB, name, ext string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/real/opencode-1.18.33-" + name + "." + ext)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// opencodeCall is what Run would make of a recorded call: its events
// (stdout's, then stderr's notices) and their Result.
func opencodeCall(t *testing.T, name string) ([]Event, Result) {
	t.Helper()
	evs := parse(t, "opencode", realOpencode(t, name, "jsonl"))
	b := backendFor("opencode")
	for _, l := range strings.Split(realOpencode(t, name, "stderr"), "\n") {
		if l != "" {
			b.stderrLine(l, func(e Event) { evs = append(evs, e) })
		}
	}
	checkEvents(t, evs)
	acc := &accumulator{o: &Options{}}
	for _, e := range evs {
		acc.add(e)
	}
	var r Result
	acc.result(&r)
	return evs, r
}

func TestOpencodeRealFix(t *testing.T) {
	evs, r := opencodeCall(t, "fix")
	// Four steps: read, edit, bash, the answer; no event after the last
	// step_finish, so the final answer is read from it.
	want := Result{Text: "Add now returns a + b and the tests pass.\n<promise>COMPLETE</promise>", Turns: 4, ToolUses: 3,
		Tokens:    Usage{Input: 2000 + 400 + 200 + 200, Output: 48 + 80 + 30 + 25, Reasoning: 12, CacheRead: 9000 + 11000 + 11400 + 11600},
		SessionID: r.SessionID}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(r.SessionID, "ses_") {
		t.Errorf("session %q", r.SessionID)
	}
	var tools []string
	for _, e := range ofKind(evs, EventToolUse) {
		tools = append(tools, e.Tool)
	}
	if strings.Join(tools, " ") != "read edit bash" {
		t.Errorf("tools %q", tools)
	}
	res := ofKind(evs, EventToolResult)
	if len(res) != 3 || res[1].Text != "Edit applied successfully." || !strings.HasPrefix(res[2].Text, "ok") || res[2].IsError {
		t.Errorf("tool results %+v", res)
	}
	if f := ofKind(evs, EventFinal); len(f) != 1 {
		t.Errorf("%d final events, want 1", len(f))
	}
	// OpenCode reported cost 0 for a model it has no price for: no cost.
	if c := ofKind(evs, EventCost); len(c) != 0 || r.CostSource != "" {
		t.Errorf("cost events %+v, source %q", c, r.CostSource)
	}
}

func TestOpencodeRealRetries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries []string
	}{
		{"retry", []string{"Too Many Requests", "Too Many Requests", "The model is overloaded. Please try again later."}},
		{"limit", []string{"You have reached your usage limit. It resets at "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, r := opencodeCall(t, tc.name)
			if r.IsError || r.Limit != nil || r.Turns != 4 || !strings.Contains(r.Text, "<promise>COMPLETE</promise>") {
				t.Errorf("the call went on after its retries: %+v", r)
			}
			if len(r.Retries) != len(tc.retries) {
				t.Fatalf("retries %+v, want %q", r.Retries, tc.retries)
			}
			for i, want := range tc.retries {
				if !strings.HasPrefix(r.Retries[i].Message, want) {
					t.Errorf("retry %d: %q, want %q…", i, r.Retries[i].Message, want)
				}
			}
			if len(ofKind(evs, EventError)) != 0 {
				t.Errorf("a retry became an error")
			}
		})
	}
}

func TestOpencodeRealRetryThenFail(t *testing.T) {
	_, r := opencodeCall(t, "retry-fail")
	// The 429 was a notice; the 400 that followed is the call's error.
	if !r.IsError || r.Limit != nil || r.Text != "messages: the request is malformed (mock)" {
		t.Errorf("result %+v", r)
	}
	if len(r.Retries) != 1 || r.Retries[0].Message != "Too Many Requests" {
		t.Errorf("retries %+v", r.Retries)
	}
}

func TestOpencodeRealDenied(t *testing.T) {
	for _, tc := range []struct{ name, tool, target string }{
		{"denied", "edit", "/calc.go"},
		{"denied-bash", "bash", "sleep 300"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, r := opencodeCall(t, tc.name)
			if len(r.Denials) != 1 {
				t.Fatalf("denials %+v", r.Denials)
			}
			d := r.Denials[0]
			if d.Tool != tc.tool || !strings.HasSuffix(d.Target, tc.target) ||
				d.Message != "The user rejected permission to use this specific tool call." {
				t.Errorf("denial %+v", d)
			}
			// The tool use is recorded, and failed.
			res := ofKind(evs, EventToolResult)
			if len(res) == 0 || !res[len(res)-1].IsError {
				t.Errorf("tool results %+v", res)
			}
		})
	}
}

func TestOpencodeRealUnauthenticated(t *testing.T) {
	_, r := opencodeCall(t, "unauth")
	want := "opencode: the model provider refused its credentials (Invalid API key); run `opencode auth login` or set the provider's apiKey in opencode.json"
	if !r.IsError || r.Text != want || r.Limit != nil {
		t.Errorf("result %+v\nwant text %q", r, want)
	}
}

func TestOpencodeRealHangAndFlood(t *testing.T) {
	// Killed while the model's stream hung: the step had started, nothing
	// else; no final answer.
	evs, r := opencodeCall(t, "hang")
	if len(ofKind(evs, EventFinal)) != 0 || r.IsError || r.Turns != 0 {
		t.Errorf("hang: %+v", r)
	}
	_, r = opencodeCall(t, "flood")
	// The text is the bounded tail; the output file has the whole.
	if len(r.Text) != MaxText || r.TextCut != 256<<10-MaxText || r.Turns != 1 {
		t.Errorf("flood: %d bytes of text (%d cut), %d turns", len(r.Text), r.TextCut, r.Turns)
	}
}

func TestOpencodeErrors(t *testing.T) {
	t.Parallel()
	line := func(data map[string]any) string {
		b, _ := json.Marshal(map[string]any{"type": "error", "timestamp": 1, "sessionID": "s",
			"error": map[string]any{"name": "APIError", "data": data}})
		return string(b)
	}
	runParseCases(t, "opencode", []parseCase{
		{"retry-after-ms gives the exact reset", line(map[string]any{"message": "Too Many Requests", "statusCode": 429,
			"isRetryable": true, "responseHeaders": map[string]any{"retry-after-ms": "1500"}}), []Event{
			{Kind: EventSession, SessionID: "s"}, {Kind: EventError, Text: "Too Many Requests",
				Limit: &Limit{Kind: LimitRate, Reset: fixedNow.Add(1500 * time.Millisecond), Message: "Too Many Requests"}}}},
		{"retry-after as a date", line(map[string]any{"message": "Overloaded", "statusCode": 529,
			"responseHeaders": map[string]any{"retry-after": fixedNow.Add(time.Hour).Format(http.TimeFormat)}}), []Event{
			{Kind: EventSession, SessionID: "s"}, {Kind: EventError, Text: "Overloaded",
				Limit: &Limit{Kind: LimitOverloaded, Reset: fixedNow.Add(time.Hour), Message: "Overloaded"}}}},
		{"a header of the wrong type is ignored", line(map[string]any{"message": "Too Many Requests", "statusCode": 429,
			"responseHeaders": map[string]any{"retry-after-ms": 12}}), []Event{
			{Kind: EventSession, SessionID: "s"}, {Kind: EventError, Text: "Too Many Requests",
				Limit: &Limit{Kind: LimitRate, Message: "Too Many Requests"}}}},
		{"auth error", `{"type":"error","timestamp":1,"sessionID":"s","error":{"name":"ProviderAuthError","data":{"providerID":"anthropic","message":"no API key"}}}`, []Event{
			{Kind: EventSession, SessionID: "s"}, {Kind: EventError,
				Text: "opencode: the model provider refused its credentials (no API key); run `opencode auth login` or set the provider's apiKey in opencode.json"}}},
		{"a rule denies", `{"type":"tool_use","timestamp":1,"sessionID":"s","part":{"type":"tool","tool":"webfetch","callID":"c1","state":{"status":"error","input":{"url":"https://example.com"},"error":"The user has specified a rule which prevents you from using this specific tool call. Here are some of the relevant rules [{\"permission\":\"webfetch\",\"pattern\":\"*\",\"action\":\"deny\"}]"}}}`, []Event{
			{Kind: EventSession, SessionID: "s"},
			{Kind: EventToolUse, Tool: "webfetch", ToolID: "c1", Input: `{"url":"https://example.com"}`},
			{Kind: EventToolResult, ToolID: "c1", IsError: true, Text: short("The user has specified a rule which prevents you from using this specific tool call. Here are some of the relevant rules [{\"permission\":\"webfetch\",\"pattern\":\"*\",\"action\":\"deny\"}]")},
			{Kind: EventDenied, Denial: &Denial{Tool: "webfetch", Target: "https://example.com",
				Message: short("The user has specified a rule which prevents you from using this specific tool call. Here are some of the relevant rules [{\"permission\":\"webfetch\",\"pattern\":\"*\",\"action\":\"deny\"}]")}}}},
		{"a priced step", `{"type":"step_finish","timestamp":1,"sessionID":"s","part":{"type":"step-finish","reason":"stop","cost":0.0123,"tokens":{"input":5,"output":7,"reasoning":3,"cache":{"read":11,"write":13}}}}`, []Event{
			{Kind: EventSession, SessionID: "s"},
			{Kind: EventUsage, Usage: Usage{Input: 5, Output: 7, Reasoning: 3, CacheRead: 11, CacheWrite: 13}},
			{Kind: EventCost, CostUSD: 0.0123},
			{Kind: EventFinal, Turns: 1}}},
		{"binary", "\x00\x01\xff\xfe{\"type\"", []Event{{Kind: EventRaw, Text: "\x00\x01\ufffd{\"type\""}}},
	})
}

func TestOpencodeStderrLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line   string
		notice bool
		retry  string
	}{
		{`timestamp=2026-11-25T23:50:08.787Z level=ERROR run=7ca68be1 message="stream error" providerID=mock modelID=mock-coder session.id=ses_x small=false agent=build mode=primary error.error="AI_APICallError: Too Many Requests"`, true, "Too Many Requests"},
		{`timestamp=t level=ERROR message="stream error" small=false error.error="AI_APICallError: rate limited, say \"later\""`, true, `rate limited, say "later"`},
		{`timestamp=t level=ERROR message="stream error" small=true error.error="AI_APICallError: Too Many Requests"`, true, ""},
		{"\x1b[93m\x1b[1m! \x1b[0mpermission requested: edit (calc.go); auto-rejecting", true, ""},
		{`timestamp=t level=ERROR message="failed to load plugin" error="x"`, false, ""},
		{"Error: something else", false, ""},
		{`level=ERROR message="stream error" error.error="Service Unavailable`, true, "Service Unavailable"},
		{`level=ERROR message="stream error" small=false error.error="AI_APICallError: Invalid API key"`, false, ""},
		{`level=ERROR message="stream error" small=false error.error="AI_APICallError: messages: the request is malformed (mock)"`, false, ""},
		{`level=ERROR message="stream error" small=false error.error="AI_APICallError: Cannot connect to API: Unable to connect."`, true, "Cannot connect to API: Unable to connect."},
	} {
		var got []Event
		notice := opencodeStderrLine(tc.line, func(e Event) { got = append(got, e) })
		if notice != tc.notice {
			t.Errorf("%q: notice %t, want %t", tc.line, notice, tc.notice)
		}
		switch {
		case tc.retry == "" && len(got) != 0:
			t.Errorf("%q: events %+v, want none", tc.line, got)
		case tc.retry != "" && (len(got) != 1 || got[0].Kind != EventRetry || got[0].Retry.Message != tc.retry):
			t.Errorf("%q: events %+v, want a retry %q", tc.line, got, tc.retry)
		}
	}
}

func TestOpencodePermissions(t *testing.T) {
	t.Parallel()
	p := PermissionsFor("opencode", []string{"go", "test", "./..."}, false)
	if len(p.Args) != 0 || len(p.Env) != 1 || len(p.Comment) == 0 {
		t.Fatalf("permissions %+v", p)
	}
	name, value, _ := strings.Cut(p.Env[0], "=")
	if name != "OPENCODE_PERMISSION" {
		t.Fatalf("env %q", p.Env[0])
	}
	var perm map[string]any
	if err := json.Unmarshal([]byte(value), &perm); err != nil {
		t.Fatalf("OPENCODE_PERMISSION is not JSON: %v", err)
	}
	want := map[string]any{"*": "ask", "edit": "allow", "glob": "allow", "grep": "allow", "list": "allow", "todowrite": "allow",
		"read": map[string]any{"*": "allow", "*.env": "ask", "*.env.*": "ask", "*.env.example": "allow"},
		"bash": map[string]any{"*": "ask", "go test ./... *": "allow"}}
	if diff := cmp.Diff(want, perm); diff != "" {
		t.Errorf("permission (-want +got):\n%s", diff)
	}
	// The catch-all comes first: OpenCode's last matching rule wins.
	if !strings.HasPrefix(value, `{"*":"ask",`) || !strings.Contains(value, `"bash":{"*":"ask","go test ./... *":"allow"}`) {
		t.Errorf("rule order: %s", value)
	}
	full := PermissionsFor("opencode", []string{"go", "test", "./..."}, true)
	if cmp.Diff([]string{"--auto"}, full.Args) != "" || len(full.Env) != 0 || !strings.Contains(full.Comment[0], "WARNING") {
		t.Errorf("full access %+v", full)
	}
	if p := PermissionsFor("opencode", nil, false); !strings.HasSuffix(p.Env[0], `"bash":{"*":"ask"}}`) {
		t.Errorf("no test command, yet one allowed: %s", p.Env[0])
	}
}

func TestOpencodeRealLimitFinal(t *testing.T) {
	// Six 429s: OpenCode retried five times, then gave up; its error event
	// carries the response's retry-after-ms, the exact wait.
	evs, r := opencodeCall(t, "limit-final")
	if !r.IsError || r.Limit == nil || r.Limit.Kind != LimitUsage || r.Limit.Reset.IsZero() {
		t.Fatalf("result %+v, limit %+v", r, r.Limit)
	}
	errs := ofKind(evs, EventError)
	if len(errs) != 1 || errs[0].Limit.Reset != fixedNow.Add(300*time.Millisecond) {
		t.Errorf("error events %+v", errs)
	}
	if len(r.Retries) != 6 {
		t.Errorf("%d retry notices, want 6 (one per failed attempt)", len(r.Retries))
	}
}

func TestOpencodeRealBadModel(t *testing.T) {
	// `--model mock/no-such-model`: standard output says only "Unexpected
	// server error"; the log on standard error names the cause.
	evs, r := opencodeCall(t, "bad-model")
	errs := ofKind(evs, EventError)
	if len(errs) != 2 || !r.IsError {
		t.Fatalf("errors %+v", errs)
	}
	if !strings.HasPrefix(errs[0].Text, "opencode: Unexpected server error. Check server logs for details (ref err_") {
		t.Errorf("stdout's error %q", errs[0].Text)
	}
	want := "opencode: Model not found: mock/no-such-model; set --model provider/model in [agent] args (or \"model\" in opencode.json) to one `opencode models` lists"
	if errs[1].Text != want {
		t.Errorf("stderr's error %q\nwant %q", errs[1].Text, want)
	}
}
