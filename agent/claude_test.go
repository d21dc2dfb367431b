package agent

import (
	"encoding/json"
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/ralphloop/ralph/internal/mockmodel"
)

// The transcripts in testdata/real were recorded from the real Claude Code
// of each version agents/package.json pins, run against the mock model
// server (agent/conformance, RALPH_RECORD=1); the expectations below are
// read from the same lines with encoding/json where the recording varies
// (paths, ids).

// claudeVersions are the Claude Code versions transcripts were recorded
// from: each test of a transcript holds for all of them.
var claudeVersions = []string{"2.1.197", "2.1.332"}

// eachClaude runs f as a parallel subtest for each of claudeVersions.
func eachClaude(t *testing.T, f func(t *testing.T, v string)) {
	for _, v := range claudeVersions {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			f(t, v)
		})
	}
}

func realClaude(t testing.TB, v, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/real/claude-" + v + "-" + name + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// claudeLineOf is the transcript's first line of type typ ("" when none):
// 2.1.332 no longer prints "type" first.
func claudeLineOf(transcript, typ string) string {
	for _, l := range strings.Split(transcript, "\n") {
		var m struct{ Type string }
		if json.Unmarshal([]byte(l), &m) == nil && m.Type == typ {
			return l
		}
	}
	return ""
}

// claudeResultLine is the transcript's result line, read by encoding/json.
type claudeResultLine struct {
	Result       string  `json:"result"`
	IsError      bool    `json:"is_error"`
	NumTurns     int     `json:"num_turns"`
	TotalCostUSD float64 `json:"total_cost_usd"`
	SessionID    string  `json:"session_id"`
	Usage        struct {
		Input      int64 `json:"input_tokens"`
		Output     int64 `json:"output_tokens"`
		CacheRead  int64 `json:"cache_read_input_tokens"`
		CacheWrite int64 `json:"cache_creation_input_tokens"`
	} `json:"usage"`
	Denials []struct {
		ToolName  string         `json:"tool_name"`
		ToolUseID string         `json:"tool_use_id"`
		ToolInput map[string]any `json:"tool_input"`
	} `json:"permission_denials"`
}

func claudeResultOf(t *testing.T, transcript string) claudeResultLine {
	t.Helper()
	var r claudeResultLine
	l := claudeLineOf(transcript, "result")
	if l == "" {
		t.Fatal("no result line")
	}
	if err := json.Unmarshal([]byte(l), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// accumulate is what Run makes of a transcript's events (the clock is now).
func accumulate(t *testing.T, transcript string, now time.Time) (Result, []Event) {
	t.Helper()
	p := claudeBackend().newParser(func() time.Time { return now })
	acc := &accumulator{o: &Options{}}
	var evs []Event
	scanLines(strings.NewReader(transcript), func(l []byte) {
		p.line(l, func(e Event) { evs = append(evs, e); acc.add(e) })
	})
	var r Result
	acc.result(&r)
	return r, evs
}

func ofKind(evs []Event, k EventKind) []Event {
	var out []Event
	for _, e := range evs {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// TestClaudeRealFix: the whole call: text, three tool uses and their
// results, the result's usage (cache tokens included) replacing the
// stream-start usage of each message, the reported cost, the final text.
func TestClaudeRealFix(t *testing.T) {
	t.Parallel()
	eachClaude(t, func(t *testing.T, v string) {
		tr := realClaude(t, v, "fix")
		want := claudeResultOf(t, tr)
		res, evs := accumulate(t, tr, fixedNow)
		if res.Text != "Add now returns a + b; go test passes." || res.IsError || res.Turns != want.NumTurns || res.Turns != 4 {
			t.Errorf("result: text %q, error %t, turns %d", res.Text, res.IsError, res.Turns)
		}
		u := want.Usage
		if wantTok := (Usage{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite}); res.Tokens != wantTok {
			t.Errorf("tokens %+v, want the result's %+v", res.Tokens, wantTok)
		}
		if res.Tokens.Output <= 4 || res.Tokens.CacheRead == 0 || res.Tokens.CacheWrite == 0 {
			t.Errorf("tokens %+v: the stream-start output_tokens (1 a message) were kept", res.Tokens)
		}
		if res.CostUSD != want.TotalCostUSD || res.CostSource != "reported" || res.CostUSD == 0 {
			t.Errorf("cost %v (%s), want %v reported", res.CostUSD, res.CostSource, want.TotalCostUSD)
		}
		if res.SessionID != want.SessionID || res.ToolUses != 3 || len(res.Denials) != 0 || len(res.Retries) != 0 {
			t.Errorf("session %q, tool uses %d, denials %v, retries %v", res.SessionID, res.ToolUses, res.Denials, res.Retries)
		}
		var tools []string
		for _, e := range ofKind(evs, EventToolUse) {
			tools = append(tools, e.Tool)
		}
		if diff := cmp.Diff([]string{"Read", "Edit", "Bash"}, tools); diff != "" {
			t.Errorf("tools (-want +got):\n%s", diff)
		}
		results := ofKind(evs, EventToolResult)
		if len(results) != 3 || results[2].Text == "" || !strings.HasPrefix(results[2].Text, "ok calc") {
			t.Errorf("tool results %+v", results)
		}
		for _, r := range results {
			if r.IsError {
				t.Errorf("tool result %s is an error: %q", r.ToolID, r.Text)
			}
		}
	})
}

// TestClaudeRealDenied: without permissions the Edit is refused (the
// tool_result's "Claude requested permissions to write to …") and so is
// the Bash test command ("This command requires approval"): each one
// EventDenied with tool and target, as it happens, and not again for
// the result's permission_denials.
func TestClaudeRealDenied(t *testing.T) {
	t.Parallel()
	eachClaude(t, func(t *testing.T, v string) {
		tr := realClaude(t, v, "denied")
		want := claudeResultOf(t, tr)
		res, _ := accumulate(t, tr, fixedNow)
		if len(want.Denials) != 2 || len(res.Denials) != 2 {
			t.Fatalf("denials %+v, the result lists %d", res.Denials, len(want.Denials))
		}
		path := want.Denials[0].ToolInput["file_path"].(string)
		if diff := cmp.Diff([]Denial{
			{Tool: "Edit", Target: path, Message: "Claude requested permissions to write to " + path + ", but you haven't granted it yet."},
			{Tool: "Bash", Target: "go test ./...", Message: "This command requires approval"},
		}, res.Denials); diff != "" {
			t.Errorf("denials (-want +got):\n%s", diff)
		}
		if !strings.HasSuffix(path, "/calc.go") {
			t.Errorf("denied path %q", path)
		}
	})
}

// TestClaudeDeniedOnlyInResult: a denial the result lists without a
// tool_result text (a newer Claude Code, a tool ralph does not know) is
// still one EventDenied.
func TestClaudeDeniedOnlyInResult(t *testing.T) {
	t.Parallel()
	evs := parse(t, "claude", `{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"done","session_id":"s1",`+
		`"permission_denials":[{"tool_name":"Write","tool_use_id":"toolu_9","tool_input":{"file_path":"/w/new.go","content":"x"}}]}`)
	if diff := cmp.Diff([]Event{
		{Kind: EventSession, SessionID: "s1"},
		{Kind: EventDenied, Denial: &Denial{Tool: "Write", Target: "/w/new.go", Message: "Claude Code was not permitted to run Write"}},
		{Kind: EventFinal, Text: "done", Turns: 2},
	}, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestClaudeRealRetry: system/api_retry lines (429, 503, 529) are
// EventRetry with status, attempt, max and delay; the call then succeeds
// and is no error and no limit.
func TestClaudeRealRetry(t *testing.T) {
	t.Parallel()
	eachClaude(t, func(t *testing.T, v string) {
		res, _ := accumulate(t, realClaude(t, v, "retry"), fixedNow)
		if res.IsError || res.Limit != nil || res.Text != "Add now returns a + b; go test passes." {
			t.Errorf("result: error %t, limit %v, text %q", res.IsError, res.Limit, res.Text)
		}
		if len(res.Retries) != 3 {
			t.Fatalf("retries %+v", res.Retries)
		}
		for i, want := range []struct {
			status int
			msg    string
		}{{429, "rate_limit"}, {503, "server_error"}, {529, "overloaded"}} {
			r := res.Retries[i]
			if r.Status != want.status || r.Message != want.msg || r.Attempt != i+1 || r.Max != 10 || r.Delay < 900*time.Millisecond || r.Delay > 10*time.Second {
				t.Errorf("retry %d: %+v, want status %d %s", i, r, want.status, want.msg)
			}
		}
	})
}

// TestClaudeRealRetryFatal: a 429 retried, then a 400: the call's error is
// the 400 and not a limit.
func TestClaudeRealRetryFatal(t *testing.T) {
	t.Parallel()
	eachClaude(t, func(t *testing.T, v string) {
		res, _ := accumulate(t, realClaude(t, v, "retry-fatal"), fixedNow)
		if !res.IsError || res.Limit != nil || !strings.Contains(res.Text, "API Error: 400") || len(res.Retries) != 1 || res.Retries[0].Status != 429 {
			t.Errorf("result: error %t, limit %+v, text %q, retries %+v", res.IsError, res.Limit, res.Text, res.Retries)
		}
	})
}

// TestClaudeRealLimit: a subscription's usage limit: rate_limit_event's
// resetsAt is the exact reset, and the later "resets 12:48am (UTC)"
// (minutes only) never replaces it: not when the clock is an hour before,
// nor when that minute is ten seconds past (which the text alone would
// read as tomorrow).
func TestClaudeRealLimit(t *testing.T) {
	t.Parallel()
	eachClaude(t, func(t *testing.T, v string) {
		tr := realClaude(t, v, "limit")
		var ev struct {
			Info struct {
				ResetsAt int64 `json:"resetsAt"`
			} `json:"rate_limit_info"`
		}
		if err := json.Unmarshal([]byte(claudeLineOf(tr, "rate_limit_event")), &ev); err != nil {
			t.Fatal(err)
		}
		reset := time.Unix(ev.Info.ResetsAt, 0)
		if ev.Info.ResetsAt == 0 || !strings.Contains(claudeResultOf(t, tr).Result, "resets ") {
			t.Fatalf("the transcript has no exact reset or no reset text")
		}
		for _, now := range []time.Time{reset.Add(-time.Hour), reset.Add(-10 * time.Second), reset.Add(10 * time.Second)} {
			res, _ := accumulate(t, tr, now)
			if !res.IsError || res.Limit == nil || res.Limit.Kind != LimitUsage || !res.Limit.Reset.Equal(reset) {
				t.Errorf("now %s: limit %+v, want a usage limit until %s", now, res.Limit, reset)
			}
		}
	})
}

// TestClaudeRealAuth: not logged in, or an invalid API key: one sentence
// that says how to fix it; not a limit.
func TestClaudeRealAuth(t *testing.T) {
	t.Parallel()
	eachClaude(t, func(t *testing.T, v string) {
		for _, name := range []string{"not-logged-in", "invalid-key"} {
			res, evs := accumulate(t, realClaude(t, v, name), fixedNow)
			if !res.IsError || res.Limit != nil || !strings.HasPrefix(res.Text, "Claude Code is not authenticated (") ||
				!strings.Contains(res.Text, "ANTHROPIC_API_KEY") || strings.Count(res.Text, ". ") > 0 {
				t.Errorf("%s: error %t, limit %+v, text %q", name, res.IsError, res.Limit, res.Text)
			}
			for _, e := range ofKind(evs, EventError) {
				if !strings.Contains(e.Text, "/login") && !strings.Contains(e.Text, "API key") {
					t.Errorf("%s: error %q loses Claude Code's words", name, e.Text)
				}
			}
		}
	})
}

// TestClaudeRealHangAndFlood: a call cut off after its init line is only
// its session; a 64 KiB answer is one text and the final.
func TestClaudeRealHangAndFlood(t *testing.T) {
	t.Parallel()
	eachClaude(t, func(t *testing.T, v string) {
		res, evs := accumulate(t, realClaude(t, v, "hang"), fixedNow)
		if len(evs) != 1 || evs[0].Kind != EventSession || res.IsError || res.Text != "" {
			t.Errorf("hang: events %+v", evs)
		}
		res, evs = accumulate(t, realClaude(t, v, "flood"), fixedNow)
		if len(res.Text) != 64<<10 || len(ofKind(evs, EventText)) != 1 || res.Tokens.Output < 64<<10/4 {
			t.Errorf("flood: text of %d bytes, %d text events, tokens %+v", len(res.Text), len(ofKind(evs, EventText)), res.Tokens)
		}
	})
}

// TestClaudeBadInput: unknown events and binary are EventRaw, readable;
// an unknown system subtype is nothing; nothing panics.
func TestClaudeBadInput(t *testing.T) {
	t.Parallel()
	evs := parse(t, "claude", `{"type":"stream_event","event":{"type":"message_delta"},"session_id":"s1"}`+"\n"+
		`{"type":"system","subtype":"compact_boundary","session_id":"s1"}`+"\n"+
		`{"type":"system","subtype":"api_retry","attempt":"x","session_id":"s1"}`)
	if len(evs) != 3 || evs[1].Kind != EventRaw || evs[2].Kind != EventRaw {
		t.Errorf("events %+v", evs)
	}
	bin := make([]byte, 1<<20)
	rand.New(rand.NewSource(1)).Read(bin)
	for _, e := range parse(t, "claude", string(bin)) {
		if e.Kind != EventRaw || !utf8.ValidString(e.Text) || len(e.Text) > maxRaw {
			t.Fatalf("binary made %s event of %d bytes", e.Kind, len(e.Text))
		}
	}
}

func TestClaudePermissions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		test []string
		full bool
		want []string
	}{
		{[]string{"go", "test", "./..."}, false, []string{"--permission-mode", "acceptEdits", "--allowedTools", "Bash(go test ./... *)"}},
		{[]string{"pytest", "-k", "add and not slow"}, false, []string{"--permission-mode", "acceptEdits", "--allowedTools", "Bash(pytest -k 'add and not slow' *)"}},
		{[]string{"sh", "-c", "it's"}, false, []string{"--permission-mode", "acceptEdits", "--allowedTools", `Bash(sh -c 'it'\''s' *)`}},
		{nil, false, []string{"--permission-mode", "acceptEdits"}},
		{[]string{"go", "test", "./..."}, true, []string{"--dangerously-skip-permissions"}},
	} {
		p := PermissionsFor("claude", tc.test, tc.full)
		if diff := cmp.Diff(tc.want, p.Args); diff != "" {
			t.Errorf("%q full %t: args (-want +got):\n%s", tc.test, tc.full, diff)
		}
		if len(p.Env) != 0 || len(p.Comment) == 0 {
			t.Errorf("%q full %t: env %q, comment %q", tc.test, tc.full, p.Env, p.Comment)
		}
		if tc.full && !strings.Contains(strings.Join(p.Comment, " "), "WARNING") {
			t.Errorf("full access without a warning: %q", p.Comment)
		}
	}
}

// TestClaudeRealOverloadedStream: a stream the API ends with an
// overloaded_error event is retried by Claude Code with no api_retry line;
// the call ends done, no error and no limit.
func TestClaudeRealOverloadedStream(t *testing.T) {
	t.Parallel()
	eachClaude(t, func(t *testing.T, v string) {
		res, _ := accumulate(t, realClaude(t, v, "overloaded"), fixedNow)
		if res.IsError || res.Limit != nil || len(res.Retries) != 0 || res.Text != "Add now returns a + b; go test passes." || res.ToolUses != 3 {
			t.Errorf("result: %+v", res)
		}
	})
}

// TestClaudeRetryConnection: api_retry for a connection error carries a
// null error_status: a retry with no status.
func TestClaudeRetryConnection(t *testing.T) {
	t.Parallel()
	evs := parse(t, "claude", `{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1250.5,"error_status":null,"error":"unknown","session_id":"s1","uuid":"u"}`)
	if diff := cmp.Diff([]Event{
		{Kind: EventSession, SessionID: "s1"},
		{Kind: EventRetry, Retry: &Retry{Attempt: 2, Max: 10, Delay: 1250500 * time.Microsecond, Message: "unknown"}},
	}, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestClaudeRootBypass: as root Claude Code 2.1.197 refuses the bypass
// flag on standard error before its stream starts (line as it printed
// it); the call's error says how to fix that.
func TestClaudeRootBypass(t *testing.T) {
	t.Parallel()
	var evs []Event
	b := claudeBackend()
	notice := b.stderrLine("--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons", func(e Event) { evs = append(evs, e) })
	if notice || len(evs) != 1 || evs[0].Kind != EventError || !strings.Contains(evs[0].Text, "IS_SANDBOX=1") {
		t.Errorf("notice %t, events %+v", notice, evs)
	}
	evs = nil
	if b.stderrLine("some other complaint", func(e Event) { evs = append(evs, e) }) || len(evs) != 0 {
		t.Errorf("another line made %+v", evs)
	}
	// 2.1.197 refuses the mode 2.1.332 calls manual (recorded from the real
	// 2.1.197 given --permission-mode manual).
	evs = nil
	b.stderrLine("error: option '--permission-mode <mode>' argument 'manual' is invalid. Allowed choices are acceptEdits, auto, bypassPermissions, default, dontAsk, plan.",
		func(e Event) { evs = append(evs, e) })
	if len(evs) != 1 || evs[0].Kind != EventError || !strings.Contains(evs[0].Text, "write default instead") {
		t.Errorf("manual on 2.1.197: %+v", evs)
	}
}

// TestClaudeRealSleep: Bash runs `sleep 300` and claude is killed: the
// stream has the tool use and Claude Code's task_started notice, and no
// tool result, no final and no error: the call's end is its stopper's to
// say.
func TestClaudeRealSleep(t *testing.T) {
	t.Parallel()
	eachClaude(t, func(t *testing.T, v string) {
		res, evs := accumulate(t, realClaude(t, v, "sleep"), fixedNow)
		uses := ofKind(evs, EventToolUse)
		cmd := map[string]string{"2.1.197": "sleep 300", "2.1.332": mockmodel.SleepCommand}[v]
		if len(uses) != 1 || uses[0].Tool != "Bash" || uses[0].Input != `{"command":"`+cmd+`","description":"Wait"}` {
			t.Errorf("tool uses %+v", uses)
		}
		if len(ofKind(evs, EventToolResult)) != 0 || len(ofKind(evs, EventRaw)) != 0 || res.IsError || len(ofKind(evs, EventFinal)) != 0 {
			t.Errorf("events %+v", evs)
		}
		// 2.1.332 says every 30 s that the tool still runs: a progress
		// notice of that tool call, never raw JSON.
		progress := ofKind(evs, EventProgress)
		if v == "2.1.197" {
			return
		}
		if len(progress) == 0 || progress[0].Tool != "Bash" || progress[0].ToolID != uses[0].ToolID || progress[0].Text != "Bash running for 30s" {
			t.Errorf("progress %+v", progress)
		}
	})
}

// TestClaudeLimitEventFirst: after a rejected rate_limit_event, the error
// that follows is that limit with the event's exact reset, whatever its
// words: Claude Code 2.1.332 says "hit your 5-hour limit" (2.1.197 said
// "session limit"), and a wording ralph does not know yet with the API's
// 429 is still the account's limit, never a plain rate limit. (Before, the
// 2.1.332 text was taken for a rate limit without a reset: ralph backed off
// 60 s, retried before the reset, and waited 120 s more.) Without the
// event, the text is read, digits and all.
func TestClaudeLimitEventFirst(t *testing.T) {
	t.Parallel()
	const resetsAt = 1795918755 // 2026-11-29 02:19:15 UTC
	event := `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1795918755,"rateLimitType":"five_hour"},"session_id":"s1"}`
	result := func(text string) string {
		b, _ := json.Marshal(map[string]any{"type": "result", "subtype": "success", "is_error": true, "api_error_status": 429,
			"result": text, "session_id": "s1"})
		return string(b)
	}
	now := time.Unix(resetsAt, 0).Add(-time.Hour)
	for _, tc := range []struct {
		name, stream string
		kind         string
		reset        time.Time
		exact        bool
	}{
		{"5-hour", event + "\n" + result("You've hit your 5-hour limit · resets 2:19am (UTC)"), LimitUsage, time.Unix(resetsAt, 0), true},
		{"weekly", event + "\n" + result("You've hit your weekly limit · resets Dec 3, 9am (UTC)"), LimitUsage, time.Unix(resetsAt, 0), true},
		{"unknown words", event + "\n" + result("Your plan's allowance is spent."), LimitUsage, time.Unix(resetsAt, 0), true},
		{"text only", result("You've hit your 5-hour limit · resets 2:19am (UTC)"), LimitUsage, time.Date(2026, 11, 29, 2, 19, 0, 0, time.UTC), false},
		{"Opus text only", result("You've hit your Opus limit · resets 2:19am (UTC)"), LimitUsage, time.Date(2026, 11, 29, 2, 19, 0, 0, time.UTC), false},
		{"usage credit text only", result("You've hit your usage credit limit"), LimitUsage, time.Time{}, false},
		{"429 without words", result("API Error: Request rejected (429)"), LimitRate, time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := accumulate(t, tc.stream, now)
			l := res.Limit
			if l == nil || l.Kind != tc.kind || !l.Reset.Equal(tc.reset) || l.Exact != tc.exact {
				t.Fatalf("limit %+v, want %s until %s (exact %t)", l, tc.kind, tc.reset, tc.exact)
			}
		})
	}
}
