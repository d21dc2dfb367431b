package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The recorded transcripts of the real gemini 0.61.0 against the mock
// Gemini API (agent/conformance, RALPH_RECORD=1), with the exit code it
// gave on each.
var geminiReal = map[string]int{
	"fix": 0, "denied": 0, "denied-shell": 0, "flood": 0, "retry": 0,
	"limit": 173, "retry-fail": 144, "invalid-key": 144, "unauthenticated": 41, "untrusted": 55,
	"outside": 0, "denied-plan": 0,
	"hang": -1, // killed mid-reply: replayed as a process that goes silent
}

func geminiRealFile(t testing.TB, name, ext string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "real", "gemini-0.61.0-"+name+ext))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// replayGemini runs a recorded case through Run as the real gemini: a
// script that prints the recorded standard error and output and exits
// with the recorded code.
func replayGemini(t *testing.T, name string, o Options) (Result, []Event) {
	t.Helper()
	code, ok := geminiReal[name]
	if !ok {
		t.Fatalf("no recorded case %q", name)
	}
	dir := t.TempDir()
	base, err := filepath.Abs(filepath.Join("testdata", "real", "gemini-0.61.0-"+name))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "gemini")
	end := fmt.Sprintf("exit %d", code)
	if code < 0 {
		end = "exec sleep 30"
	}
	body := fmt.Sprintf("#!/bin/sh\ncat >/dev/null\ncat '%s.stderr' >&2\ncat '%s.jsonl'\n%s\n", base, base, end)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	var evs []Event
	o.CLI, o.Dir, o.Prompt = "gemini", dir, "fix it"
	o.LookPath = func(string) (string, error) { return script, nil }
	o.OnEvent = func(e Event) { evs = append(evs, e) }
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return res, evs
}

func TestGeminiRealFix(t *testing.T) {
	t.Parallel()
	evs := parse(t, "gemini", geminiRealFile(t, "fix", ".jsonl"))
	tid := func(name, n string) string { return name + "__" + name + "_" + n }
	want := []Event{
		{Kind: EventSession, SessionID: "e03bc994-ed44-4415-95a2-739a05c71597"},
		{Kind: EventText, Text: "I will read calc.go first."},
		{Kind: EventToolUse, Tool: "read_file", ToolID: tid("read_file", "1795650505419_0"), Input: `{"file_path":"calc.go"}`},
		{Kind: EventToolResult, ToolID: tid("read_file", "1795650505419_0")},
		{Kind: EventText, Text: "Add subtracts; fixing it."},
		{Kind: EventToolUse, Tool: "replace", ToolID: tid("replace", "1795650506212_0"),
			Input: `{"file_path":"calc.go","instruction":"Make Add return the sum of a and b.","new_string":"return a + b","old_string":"return a - b"}`},
		{Kind: EventToolResult, ToolID: tid("replace", "1795650506212_0")},
		{Kind: EventText, Text: "Running the tests."},
		{Kind: EventToolUse, Tool: "run_shell_command", ToolID: tid("run_shell_command", "1795650506450_0"),
			Input: `{"command":"go test ./...","description":"Run the tests."}`},
		{Kind: EventToolResult, ToolID: tid("run_shell_command", "1795650506450_0"), Text: "ok \tcalc\t0.018s"},
		{Kind: EventText, Text: "Add now returns a + b; go test ./... passes."},
		{Kind: EventText, Text: "Done."},
		// total 47104 = prompt 47041 + output 51 + 12 thought tokens.
		// stats.models splits the totals: the router's small model and the
		// main one, each priced as itself.
		{Kind: EventUsage, Total: true, Usage: Usage{Input: 46977, Output: 51, CacheRead: 64, Reasoning: 12},
			Model: "gemini-3.8-flash", Models: []ModelUsage{
				{Model: "gemini-3.5-flash-lite", Usage: Usage{Input: 10, Output: 5}},
				{Model: "gemini-3.8-flash", Usage: Usage{Input: 46967, Output: 46, CacheRead: 64, Reasoning: 12}},
			}},
		{Kind: EventFinal, Text: "Add now returns a + b; go test ./... passes.\nDone.", Turns: 4},
	}
	want[9].Text = short("ok  \tcalc\t0.018s")
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	res, _ := replayGemini(t, "fix", Options{Price: &Price{Input: 1, Output: 10, CacheRead: 0.1}})
	if res.Exit != 0 || res.IsError || res.Limit != nil || res.Turns != 4 || res.ToolUses != 3 || len(res.Denials)+len(res.Retries) != 0 {
		t.Errorf("result: %+v", res)
	}
	if wantCost := (46977*1 + 51*10 + 64*0.1 + 12*10) / 1e6; res.CostSource != "price" || res.CostUSD != wantCost {
		t.Errorf("cost %v (%s), want %v priced, reasoning as output", res.CostUSD, res.CostSource, wantCost)
	}
}

func TestGeminiRealDenied(t *testing.T) {
	t.Parallel()
	res, evs := replayGemini(t, "denied", Options{})
	want := []Denial{
		{Tool: "replace", Target: "calc.go", Message: `Tool "replace" not found. Did you mean one of: "read_file", "grep_search", "glob"?`},
		{Tool: "run_shell_command", Target: "go test ./...", Message: `Tool "run_shell_command" not found. Did you mean one of: "update_topic", "grep_search", "invoke_agent"?`},
	}
	if diff := cmp.Diff(want, res.Denials); diff != "" {
		t.Errorf("denials (-want +got):\n%s", diff)
	}
	if got := len(ofKind(evs, EventDenied)); got != 2 {
		t.Errorf("%d denied events, want 2", got)
	}
	// Each denial follows its tool's failed result.
	for i, e := range evs {
		if e.Kind == EventDenied && (i == 0 || evs[i-1].Kind != EventToolResult || !evs[i-1].IsError) {
			t.Errorf("denial %d does not follow a failed tool result: %+v", i, evs[i-1])
		}
	}

	res, _ = replayGemini(t, "denied-shell", Options{})
	if diff := cmp.Diff([]Denial{{Tool: "run_shell_command", Target: "rm -rf calc_test.go",
		Message: "Tool execution denied by policy."}}, res.Denials); diff != "" {
		t.Errorf("policy denial (-want +got):\n%s", diff)
	}
}

func TestGeminiUnknownToolIsNotADenial(t *testing.T) {
	t.Parallel()
	in := `{"type":"tool_use","timestamp":"t","tool_name":"frobnicate","tool_id":"f1","parameters":{}}` + "\n" +
		`{"type":"tool_result","timestamp":"t","tool_id":"f1","status":"error","output":"Tool \"frobnicate\" not found.","error":{"type":"tool_not_registered","message":"Tool \"frobnicate\" not found."}}`
	if d := ofKind(parse(t, "gemini", in), EventDenied); len(d) != 0 {
		t.Errorf("a tool that does not exist became a denial: %+v", d)
	}
}

func TestGeminiRealLimit(t *testing.T) {
	t.Parallel()
	before := time.Now()
	res, _ := replayGemini(t, "limit", Options{})
	if res.Limit == nil || res.Limit.Kind != LimitUsage || res.Stopped != StoppedUsageLimit {
		t.Fatalf("limit %+v, stopped %q", res.Limit, res.Stopped)
	}
	// The stream says only "exhausted your daily quota"; the API's
	// "Please retry in 7200.0s." it printed on standard error is the reset.
	if d := res.Limit.Reset.Sub(before); d < 7200*time.Second || d > 7200*time.Second+time.Minute {
		t.Errorf("reset in %v, want 2h", d)
	}
	if !strings.Contains(res.Limit.Message, "exhausted your daily quota") {
		t.Errorf("limit message %q", res.Limit.Message)
	}
}

func TestGeminiRealRetry(t *testing.T) {
	t.Parallel()
	res, evs := replayGemini(t, "retry", Options{})
	want := []Retry{
		{Status: 503, Attempt: 1, Message: "The model is overloaded. Please try again later."},
		{Status: 429, Attempt: 2, Delay: 11736 * time.Millisecond, Message: short("You exceeded your current quota, please check your plan and billing details. " +
			"* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: gemini-2.5-pro " +
			"Please retry in 1s. Suggested retry after 1s.. Retrying after 11736ms...")},
	}
	if diff := cmp.Diff(want, res.Retries); diff != "" {
		t.Errorf("retries (-want +got):\n%s", diff)
	}
	if len(ofKind(evs, EventRetry)) != 2 || res.Limit != nil || res.IsError || res.Exit != 0 || res.Stopped != "" {
		t.Errorf("result %+v", res)
	}
}

func TestGeminiRealRetryThenError(t *testing.T) {
	t.Parallel()
	res, _ := replayGemini(t, "retry-fail", Options{})
	if len(res.Retries) != 1 || res.Retries[0].Status != 429 {
		t.Errorf("retries %+v", res.Retries)
	}
	// A 429 notice followed by a final 400 is that 400, not a limit.
	if res.Limit != nil || res.Stopped != "" {
		t.Errorf("limit %+v, stopped %q: the final error is a 400", res.Limit, res.Stopped)
	}
	if want := "gemini: API error 400 INVALID_ARGUMENT: Request contains an invalid argument."; res.Text != want || !res.IsError {
		t.Errorf("text %q (error %v), want %q", res.Text, res.IsError, want)
	}
}

func TestGeminiRealAuthAndTrust(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, want string }{
		{"unauthenticated", "gemini is not authenticated: export GEMINI_API_KEY in the environment ralph runs in, or log in by running gemini once interactively"},
		{"untrusted", "gemini refuses to run in an untrusted folder: add --skip-trust to [agent] args (ralph init writes it)"},
		{"invalid-key", "gemini: the API rejected the key (400 API_KEY_INVALID: API key not valid. Please pass a valid API key.); export a valid GEMINI_API_KEY in the environment ralph runs in"},
	} {
		res, _ := replayGemini(t, tc.name, Options{})
		if res.Text != tc.want || !res.IsError || res.Limit != nil {
			t.Errorf("%s: text %q, error %v, limit %+v; want %q", tc.name, res.Text, res.IsError, res.Limit, tc.want)
		}
	}
}

func TestGeminiRealFlood(t *testing.T) {
	t.Parallel()
	in := geminiRealFile(t, "flood", ".jsonl")
	evs := parse(t, "gemini", in)
	texts := ofKind(evs, EventText)
	var lines int
	for _, e := range texts {
		if len(e.Text) > geminiTextFlush {
			t.Fatalf("a text event of %d bytes", len(e.Text))
		}
		lines += strings.Count(e.Text, "\n") + 1
	}
	var whole strings.Builder
	for _, l := range strings.Split(in, "\n") {
		var m struct{ Role, Content string }
		if json.Unmarshal([]byte(l), &m) == nil && m.Role == "assistant" {
			whole.WriteString(m.Content)
		}
	}
	// Fragments are joined into whole lines, at most geminiTextFlush
	// bytes an event; every line is kept.
	if want := strings.Count(strings.TrimRight(whole.String(), "\n"), "\n") + 1; lines != want || len(texts) > 2*whole.Len()/geminiTextFlush+1 {
		t.Errorf("%d text events, %d lines; want %d lines", len(texts), lines, want)
	}
	final := ofKind(evs, EventFinal)
	tail := strings.TrimRight(whole.String(), "\n")
	if len(final) != 1 || len(final[0].Text) > 2*geminiMaxAnswer || !strings.HasSuffix(tail, final[0].Text) || len(final[0].Text) < geminiMaxAnswer {
		t.Errorf("final of %d bytes is not the end of the answer", len(final[0].Text))
	}
	if u := ofKind(evs, EventUsage); len(u) != 1 || u[0].Usage.Output != 65548 {
		t.Errorf("usage %+v", u)
	}
}

func TestGeminiFragmentsJoin(t *testing.T) {
	t.Parallel()
	msg := func(s string) string {
		return `{"type":"message","timestamp":"t","role":"assistant","content":` + fmt.Sprintf("%q", s) + `,"delta":true}` + "\n"
	}
	in := msg("Add now returns ") + msg("a + b; go test ") + msg("passes.\nNext") + msg(" line") +
		`{"type":"result","timestamp":"t","status":"success"}`
	want := []Event{
		{Kind: EventText, Text: "Add now returns a + b; go test passes."},
		{Kind: EventText, Text: "Next line"},
		{Kind: EventFinal, Text: "Add now returns a + b; go test passes.\nNext line", Turns: 1},
	}
	if diff := cmp.Diff(want, parse(t, "gemini", in)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// A line not ended when the output ends (the call was killed) is
	// still emitted.
	if got := ofKind(parse(t, "gemini", msg("Let me think about this")), EventText); len(got) != 1 || got[0].Text != "Let me think about this" {
		t.Errorf("text held at the end: %+v", got)
	}
	long := strings.Repeat("x", geminiTextFlush)
	if got := ofKind(parse(t, "gemini", msg(long)+msg("y")+`{"type":"result","timestamp":"t","status":"success"}`), EventText); len(got) != 2 || got[0].Text != long {
		t.Errorf("a long line without an end is held: %d events", len(got))
	}
}

func TestGeminiStderrNotices(t *testing.T) {
	t.Parallel()
	var evs []Event
	b := geminiBackend()
	var kept []string
	for _, l := range strings.Split(geminiRealFile(t, "retry-fail", ".stderr"), "\n") {
		if !b.stderrLine(l, func(e Event) { evs = append(evs, e) }) {
			kept = append(kept, l)
		}
	}
	rest := strings.Join(kept, "\n")
	if strings.Contains(rest, "Please retry in") || strings.Contains(rest, "Suggested retry") || strings.Contains(rest, "Quota exceeded") {
		t.Errorf("a retry notice's lines are left for the limit check:\n%s", rest)
	}
	if !strings.Contains(rest, "INVALID_ARGUMENT") {
		t.Errorf("the final error was taken for a notice:\n%s", rest)
	}
	if len(evs) != 1 || evs[0].Kind != EventRetry || evs[0].Retry.Delay != 5649*time.Millisecond {
		t.Errorf("events %+v", evs)
	}
	if l := geminiLimit(rest, fixedNow); l != nil {
		t.Errorf("limit %+v in what is left", l)
	}
	// The last attempt is not a retry.
	if b.stderrLine("Attempt 10 failed: overloaded. Max attempts reached", func(e Event) { t.Errorf("event %+v", e) }) {
		t.Error("the last attempt was taken for a notice")
	}
}

func TestGeminiPermissions(t *testing.T) {
	t.Parallel()
	p := PermissionsFor("gemini", []string{"go", "test", "./..."}, false)
	if want := []string{"--skip-trust", "--approval-mode", "auto_edit", "--allowed-tools", "run_shell_command(go test ./...)"}; !cmp.Equal(want, p.Args) {
		t.Errorf("args %q, want %q", p.Args, want)
	}
	if len(p.Env) != 0 || len(p.Comment) == 0 {
		t.Errorf("env %q, comment %q", p.Env, p.Comment)
	}
	p = PermissionsFor("gemini", []string{"sh", "-c", "go test ./... && it's ok"}, false)
	if want := `run_shell_command(sh -c 'go test ./... && it'\''s ok')`; p.Args[len(p.Args)-1] != want {
		t.Errorf("quoted %q, want %q", p.Args[len(p.Args)-1], want)
	}
	if p = PermissionsFor("gemini", nil, false); len(p.Args) != 3 {
		t.Errorf("no test command: %q", p.Args)
	}
	full := PermissionsFor("gemini", []string{"go", "test"}, true)
	if want := []string{"--skip-trust", "--approval-mode", "yolo"}; !cmp.Equal(want, full.Args) || !strings.Contains(full.Comment[0], "WARNING") {
		t.Errorf("full: %q %q", full.Args, full.Comment)
	}
}

func TestGeminiBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "gemini")
	// Binary on standard output; the 1 MB prompt read whole.
	body := "#!/bin/sh\nwc -c >&2\nhead -c 65536 /dev/urandom\nprintf '\\n\\377\\376{\"type\":\"result\"\\n'\nexit 1\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	var evs []Event
	res, err := Run(context.Background(), Options{CLI: "gemini", Dir: dir, Prompt: strings.Repeat("p", 1<<20),
		LookPath: func(string) (string, error) { return script, nil }, OnEvent: func(e Event) { evs = append(evs, e) }})
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, evs)
	if !strings.Contains(res.Stderr, "1048576") || res.Exit != 1 || len(ofKind(evs, EventRaw)) == 0 {
		t.Errorf("exit %d, stderr %q, %d events", res.Exit, res.Stderr, len(evs))
	}
}

// FuzzGeminiStderr: any standard error makes only retry notices and
// errors, short, and never panics.
func FuzzGeminiStderr(f *testing.F) {
	for _, name := range []string{"retry", "retry-fail", "limit", "unauthenticated", "untrusted"} {
		f.Add(geminiRealFile(f, name, ".stderr"))
	}
	f.Add("Attempt 99999999999999999999 failed with status 99999999999999999999. Retrying after 99999999999999999999ms")
	f.Fuzz(func(t *testing.T, in string) {
		b := geminiBackend()
		for _, l := range strings.Split(in, "\n") {
			b.stderrLine(l, func(e Event) {
				switch {
				case e.Kind == EventRetry && e.Retry != nil && len(e.Retry.Message) <= maxShort:
				case e.Kind == EventError && e.Text != "":
				default:
					t.Fatalf("event %+v", e)
				}
			})
		}
	})
}

func TestGeminiAPIErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		limit    string
	}{
		{`[API Error: {"error":{"code":503,"details":[],"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}]`,
			"gemini: API error 503 UNAVAILABLE: The model is overloaded. Please try again later.", LimitOverloaded},
		{`[API Error: {"error":{"code":400,"details":[],"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}]`,
			"gemini: API error 400 INVALID_ARGUMENT: Request contains an invalid argument.", ""},
		{"[API Error: fetch failed]", "[API Error: fetch failed]", ""},
		{`[API Error: {"error":{"code":"x"}}]`, `[API Error: {"error":{"code":"x"}}]`, ""},
	} {
		in := fmt.Sprintf(`{"type":"result","timestamp":"t","status":"error","error":{"type":"unknown","message":%q}}`, tc.in)
		evs := parse(t, "gemini", in)
		if len(evs) != 1 || evs[0].Kind != EventError || evs[0].Text != tc.want || (evs[0].Limit == nil) != (tc.limit == "") ||
			(evs[0].Limit != nil && evs[0].Limit.Kind != tc.limit) {
			t.Errorf("%s: %+v", tc.in, evs)
		}
	}
}

func TestGeminiRealHang(t *testing.T) {
	t.Parallel()
	res, evs := replayGemini(t, "hang", Options{IdleTimeout: time.Second})
	if res.Stopped != StoppedIdleTimeout {
		t.Errorf("stopped %q", res.Stopped)
	}
	// The reply's unended line is shown when the call is killed.
	if txt := ofKind(evs, EventText); len(txt) != 1 || txt[0].Text != "Let me think about this" {
		t.Errorf("texts %+v", txt)
	}
}

// A write outside the workspace is refused by auto_edit's boundary, which
// is what init intends: a failed tool, not a denial to stop the run for.
func TestGeminiRealOutsideWorkspace(t *testing.T) {
	t.Parallel()
	res, evs := replayGemini(t, "outside", Options{})
	if len(res.Denials) != 0 || res.IsError {
		t.Errorf("denials %+v, error %v", res.Denials, res.IsError)
	}
	if r := ofKind(evs, EventToolResult); len(r) != 1 || !r[0].IsError || !strings.HasPrefix(r[0].Text, "Path not in workspace") {
		t.Errorf("tool results %+v", r)
	}
}

// TestGeminiPlanModeDenied: under --approval-mode plan Gemini CLI is
// read-only. A model that tries the edit anyway is refused by the plan
// policy (recorded: "Tool execution denied by policy. You are in Plan
// Mode and cannot modify source code. …", policy_violation), and one that
// explains in words that it is in Plan Mode, as gemini's system prompt
// tells it to, calls no tool at all: either way the call is a denial,
// never a quiet success the loop would call stuck.
func TestGeminiPlanModeDenied(t *testing.T) {
	t.Parallel()
	plan := []string{"--skip-trust", "--approval-mode", "plan"}
	res, _ := replayGemini(t, "denied-plan", Options{Args: plan})
	if len(res.Denials) == 0 || res.Denials[0].Tool != "replace" ||
		!strings.Contains(res.Denials[0].Message, "You are in Plan Mode and cannot modify source code") {
		t.Errorf("plan-mode denials %+v", res.Denials)
	}

	script := filepath.Join(t.TempDir(), "gemini")
	body := "#!/bin/sh\ncat >/dev/null\n" +
		`echo '{"type":"init","session_id":"s1","model":"auto"}'` + "\n" +
		`echo '{"type":"message","role":"assistant","content":"I am in Plan Mode, so I cannot modify calc.go; here is the plan."}'` + "\n" +
		`echo '{"type":"result","status":"success","stats":{"total_tokens":10,"input_tokens":8,"output_tokens":2,"cached":0,"input":8}}'` + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{plan, {"--approval-mode=plan"}, {"--approval-mode", "plan", "--approval-mode", "auto_edit"}} {
		res, err := Run(context.Background(), Options{CLI: "gemini", Dir: t.TempDir(), Args: args, Timeout: time.Minute,
			LookPath: func(string) (string, error) { return script, nil }})
		if err != nil {
			t.Fatal(err)
		}
		inPlan := argValue(args, "--approval-mode") == "plan"
		if got := len(res.Denials) == 1 && res.Denials[0].Tool == "edit tools"; got != inPlan {
			t.Errorf("args %q: denials %+v", args, res.Denials)
		}
	}
}
