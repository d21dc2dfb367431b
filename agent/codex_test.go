package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The real codex's transcripts (agent/conformance TestCodexRecord, against
// internal/mockmodel): what each pinned codex-cli printed, untouched.
const codexReal = "testdata/real/codex-0.169.0-"

// codexVersions are the codex-cli versions transcripts were recorded from,
// and about when each recorded its limit case: its "try again at 12:14 AM"
// (a reset 600 s ahead) is read against that time.
var codexVersions = map[string]time.Time{
	"0.169.0": time.Date(2026, 11, 26, 0, 4, 24, 0, time.UTC),
	"0.171.0": time.Date(2026, 11, 29, 1, 35, 0, 0, time.UTC),
}

// eachCodex runs f as a parallel subtest for each of codexVersions.
func eachCodex(t *testing.T, f func(t *testing.T, v string)) {
	for v := range codexVersions {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			f(t, v)
		})
	}
}

func realFile(t testing.TB, name string) string {
	t.Helper()
	return realFileAt(t, "0.169.0", name)
}

func realFileAt(t testing.TB, v, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/real/codex-" + v + "-" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// replayCodex runs the parser over a case version v recorded, its output
// and its standard error through stderrLine, as Run does, and sums the
// events.
func replayCodex(t *testing.T, v, name string) ([]Event, Result) {
	t.Helper()
	b := codexBackend()
	p := b.newParser(func() time.Time { return codexVersions[v] })
	var evs []Event
	emit := func(e Event) { evs = append(evs, e) }
	for _, line := range strings.Split(realFileAt(t, v, name+".stderr"), "\n") {
		if line != "" {
			b.stderrLine(line, emit)
		}
	}
	scanLines(strings.NewReader(realFileAt(t, v, name+".jsonl")), func(l []byte) { p.line(l, emit) })
	checkEvents(t, evs)
	acc := &accumulator{o: &Options{}}
	for _, e := range evs {
		acc.add(e)
	}
	var res Result
	acc.result(&res)
	return evs, res
}

// codexKinds is the events' kinds and tool names, in order.
func codexKinds(evs []Event) []string {
	var out []string
	for _, e := range evs {
		s := e.Kind.String()
		if e.Tool != "" {
			s += " " + e.Tool
		}
		out = append(out, s)
	}
	return out
}

func TestCodexRealFix(t *testing.T) {
	t.Parallel()
	eachCodex(t, func(t *testing.T, v string) {
		evs, res := replayCodex(t, v, "fix")
		want := []string{"session", "text", "tool-use command_execution", "tool-result", "tool-use file_change",
			"tool-result", "tool-use command_execution", "tool-result", "text", "usage", "final"}
		if diff := cmp.Diff(want, codexKinds(evs)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		// turn.completed: input 66400 (45056 cached, 2048 written), output 473
		// (256 of it reasoning).
		wantTokens := Usage{Input: 66400 - 45056 - 2048, Output: 473 - 256, CacheRead: 45056, CacheWrite: 2048, Reasoning: 256}
		if res.Tokens != wantTokens {
			t.Errorf("tokens %+v, want %+v", res.Tokens, wantTokens)
		}
		if res.Text != "Add now returns a + b; `go test ./...` passes." || res.ToolUses != 3 || res.Turns != 1 ||
			res.IsError || res.Limit != nil || len(res.Denials) != 0 || len(res.Retries) != 0 {
			t.Errorf("result %+v", res)
		}
		for _, e := range evs {
			if e.Kind == EventToolUse && e.Tool == "command_execution" && !strings.Contains(e.Input, "cat calc.go") &&
				!strings.Contains(e.Input, "go test ./...") {
				t.Errorf("command summary %q", e.Input)
			}
			if e.Kind == EventToolUse && e.Tool == "file_change" && !strings.HasPrefix(e.Input, "update /") {
				t.Errorf("file change summary %q", e.Input)
			}
		}
		// The price is per token once: reasoning as output.
		p := Price{Input: 1, Output: 10, CacheRead: 0.1, CacheWrite: 1.25}
		if got, want := p.Cost(res.Tokens), (19296*1+217*10+45056*0.1+2048*1.25+256*10)/1e6; fmt.Sprintf("%.9f", got) != fmt.Sprintf("%.9f", want) {
			t.Errorf("cost %v, want %v", got, want)
		}
	})
}

func TestCodexRealDenied(t *testing.T) {
	t.Parallel()
	eachCodex(t, func(t *testing.T, v string) {
		evs, res := replayCodex(t, v, "denied")
		want := []Denial{{Tool: "apply_patch",
			Message: "patch rejected: writing is blocked by read-only sandbox; rejected by user approval settings"}}
		if diff := cmp.Diff(want, res.Denials); diff != "" {
			t.Errorf("denials (-want +got):\n%s\nevents %v", diff, codexKinds(evs))
		}
		if res.ToolUses != 0 {
			t.Errorf("a rejected patch counted as %d tool uses", res.ToolUses)
		}
	})
}

func TestCodexRealLimit(t *testing.T) {
	t.Parallel()
	eachCodex(t, func(t *testing.T, v string) {
		_, res := replayCodex(t, v, "limit")
		// "try again at 12:14 AM", read at 00:04:24 (0.169.0; "1:45 AM"
		// at 01:35, 0.171.0): the end of that minute.
		want := map[string]time.Time{"0.169.0": time.Date(2026, 11, 26, 0, 15, 0, 0, time.UTC),
			"0.171.0": time.Date(2026, 11, 29, 1, 46, 0, 0, time.UTC)}[v]
		if res.Limit == nil || res.Limit.Kind != LimitUsage || !res.Limit.Reset.Equal(want) {
			t.Fatalf("limit %+v, want a usage limit lifting at %s", res.Limit, want)
		}
		if !res.IsError {
			t.Error("a call that hit the limit is not an error")
		}
	})
}

func TestCodexRealRetries(t *testing.T) {
	t.Parallel()
	eachCodex(t, func(t *testing.T, v string) {
		for _, tc := range []struct {
			name    string
			retries []Retry
			done    bool
			limit   string // the limit's kind; "" none
			text    string // the error's start, when not done
		}{
			{"retry-429", []Retry{{Status: 429, Attempt: 1, Max: 2,
				Message: "Reconnecting... 1/2 (exceeded retry limit, last status: 429 Too Many Requests)"}}, true, "", ""},
			// codex retries a 503 server_is_overloaded without a word.
			{"retry-503", nil, true, "", ""},
			// A 429 retried, then a 400: the call failed with that 400, no limit.
			{"retry-429-400", []Retry{{Status: 429, Attempt: 1, Max: 2,
				Message: "Reconnecting... 1/2 (exceeded retry limit, last status: 429 Too Many Requests)"}}, false, "",
				`{"error":{"code":"invalid_value"`},
			// Overloaded past codex's retries: a transient, not a plain failure.
			{"overloaded", nil, false, LimitOverloaded, "Selected model is at capacity."},
			{"unauthenticated", []Retry{
				{Status: 401, Attempt: 1, Max: 2, Message: short("Reconnecting... 1/2 (unexpected status 401 Unauthorized: Incorrect API key provided: sk-wrong.")},
				{Status: 401, Attempt: 2, Max: 2, Message: short("Reconnecting... 2/2 (unexpected status 401 Unauthorized: Incorrect API key provided: sk-wrong.")},
			}, false, "", "codex is not authenticated: the API refused its key"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				_, res := replayCodex(t, v, tc.name)
				got := res.Retries
				for i := range got {
					if i < len(tc.retries) && strings.HasPrefix(got[i].Message, tc.retries[i].Message) {
						got[i].Message = tc.retries[i].Message
					}
				}
				if diff := cmp.Diff(tc.retries, got); diff != "" {
					t.Errorf("retries (-want +got):\n%s", diff)
				}
				if res.IsError == tc.done {
					t.Errorf("IsError %t, want %t (%q)", res.IsError, !tc.done, res.Text)
				}
				switch {
				case tc.limit == "" && res.Limit != nil:
					t.Errorf("taken for a limit: %+v", res.Limit)
				case tc.limit != "" && (res.Limit == nil || res.Limit.Kind != tc.limit):
					t.Errorf("limit %+v, want %s", res.Limit, tc.limit)
				}
				if !tc.done && !strings.HasPrefix(res.Text, tc.text) {
					t.Errorf("error %q, want it to start %q", res.Text, tc.text)
				}
			})
		}
	})
}

func TestCodexRealHangAndFlood(t *testing.T) {
	t.Parallel()
	eachCodex(t, func(t *testing.T, v string) {
		evs, res := replayCodex(t, v, "hang")
		if diff := cmp.Diff([]string{"session"}, codexKinds(evs)); diff != "" {
			t.Errorf("hang: events (-want +got):\n%s", diff)
		}
		if res.IsError || res.Turns != 0 {
			t.Errorf("hang: result %+v", res)
		}
		_, res = replayCodex(t, v, "flood")
		// The text is the bounded tail; the output file has the whole.
		if len(res.Text) != MaxText || res.TextCut != 262144-MaxText || res.Tokens.Output != 65600-64 || res.Tokens.Reasoning != 64 {
			t.Errorf("flood: %d bytes of text (%d cut), tokens %+v", len(res.Text), res.TextCut, res.Tokens)
		}
	})
}

// TestCodexRealCodeMode: codex's default model calls its tools from
// JavaScript ("exec"); the nested shell call still prints as a
// command_execution item.
func TestCodexRealCodeMode(t *testing.T) {
	t.Parallel()
	eachCodex(t, func(t *testing.T, v string) {
		evs, res := replayCodex(t, v, "codemode")
		want := []string{"session", "tool-use command_execution", "tool-result", "text", "usage", "final"}
		if diff := cmp.Diff(want, codexKinds(evs)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		if res.ToolUses != 1 || res.Text != "Read calc.go through code mode." {
			t.Errorf("result %+v", res)
		}
	})
}

func TestCodexRealBinary(t *testing.T) {
	t.Parallel()
	eachCodex(t, func(t *testing.T, v string) {
		evs, res := replayCodex(t, v, "binary")
		var result string
		for _, e := range evs {
			if e.Kind == EventToolResult {
				result = e.Text
			}
		}
		// codex decodes the bytes lossily; the NUL and the ESC become U+FFFD too.
		if result != "bin\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD[31mred" {
			t.Errorf("tool result %q", result)
		}
		if res.Text != "The command printed binary." || res.IsError {
			t.Errorf("result %+v", res)
		}
	})
}

// TestRunCodexReplay runs each recorded case through Run, with a codex
// that prints the recorded output and standard error and exits as the
// real one did: the stderr reader, the exit code and the limit check at
// the call's end included.
func TestRunCodexReplay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		exit    int
		isError bool
		limit   string
		denials int
		text    string // the result text's start
	}{
		{"fix", 0, false, "", 0, "Add now returns a + b"},
		{"denied", 0, false, "", 1, "I could not edit calc.go: patch rejected"},
		{"limit", 1, true, LimitUsage, 0, "You’ve hit your usage limit."},
		{"retry-429-400", 1, true, "", 0, `{"error":{"code":"invalid_value"`},
		{"overloaded", 1, true, LimitOverloaded, 0, "Selected model is at capacity."},
		{"unauthenticated", 1, true, "", 0, "codex is not authenticated: the API refused its key"},
		// codex exits 1 with only a line on standard error.
		{"prompt-1mb", 1, true, "", 0, "codex refused the prompt as too long (turn/start: turn/start failed: Input exceeds the maximum length of 1048576 characters."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			bin := filepath.Join(dir, "codex")
			out, _ := filepath.Abs(codexReal + tc.name + ".jsonl")
			errf, _ := filepath.Abs(codexReal + tc.name + ".stderr")
			script := fmt.Sprintf("#!/bin/sh\ncat >/dev/null\ncat %q\ncat %q >&2\nexit %d\n", out, errf, tc.exit)
			if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			res, err := Run(context.Background(), Options{CLI: "codex", Prompt: strings.Repeat("p", 1<<20), Dir: dir,
				LookPath: func(string) (string, error) { return bin, nil }, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if res.Exit != tc.exit || res.IsError != tc.isError || len(res.Denials) != tc.denials {
				t.Errorf("exit %d, IsError %t, denials %v", res.Exit, res.IsError, res.Denials)
			}
			if !strings.HasPrefix(res.Text, tc.text) {
				t.Errorf("text %q, want it to start %q", res.Text, tc.text)
			}
			if (tc.limit == "") != (res.Limit == nil) || (res.Limit != nil && res.Limit.Kind != tc.limit) {
				t.Errorf("limit %+v, want %q", res.Limit, tc.limit)
			}
		})
	}
}

func TestCodexClockReset(t *testing.T) {
	t.Parallel()
	at := func(h, m, s int) time.Time { return time.Date(2026, 8, 8, h, m, s, 0, time.UTC) }
	for _, tc := range []struct {
		name string
		now  time.Time
		text string
		want time.Time
	}{
		{"later today: the end of its minute", at(21, 58, 50), "try again at 9:59 PM.", at(22, 0, 0)},
		{"named 10 s ago: lifted, retry now", at(22, 0, 10), "try again at 9:59 PM.", at(22, 0, 10)},
		{"59 minutes ago: lifted", at(22, 58, 0), "try again at 9:59 PM.", at(22, 58, 0)},
		{"two hours ago: tomorrow", at(23, 59, 0), "try again at 9:59 PM.", at(22, 0, 0).AddDate(0, 0, 1)},
		{"11:59 PM read just after midnight: lifted", at(0, 0, 30), "try again at 11:59 PM.", at(0, 0, 30)},
		{"12:00 AM read before midnight: in a minute", at(23, 59, 30), "try again at 12:00 AM.", at(0, 1, 0).AddDate(0, 0, 1)},
		{"a date", at(10, 0, 0), "try again at Aug 9th, 2026 12:30 PM.", at(12, 31, 0).AddDate(0, 0, 1)},
		{"no time", at(10, 0, 0), "try again later.", time.Time{}},
	} {
		if got := codexClockReset(tc.text, tc.now); !got.Equal(tc.want) {
			t.Errorf("%s: %q at %s: %s, want %s", tc.name, tc.text, tc.now.Format(time.TimeOnly), got, tc.want)
		}
	}
}

func TestCodexStderrLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line   string
		notice bool
		want   []Event
	}{
		{"2026-11-25T23:49:57.780647Z ERROR codex_core::tools::router: error=exec command rejected by user", true,
			[]Event{{Kind: EventDenied, Denial: &Denial{Tool: "exec_command", Message: "exec command rejected by user"}}}},
		{"Reconnecting... waiting for network (Connection failed: error sending request)", true,
			[]Event{{Kind: EventRetry, Retry: &Retry{Message: "Reconnecting... waiting for network (Connection failed: error sending request)"}}}},
		{`WARNING: proceeding, even though we could not create PATH aliases`, false, nil},
		{"\xff\xfe binary", false, nil},
	} {
		var got []Event
		if n := codexStderrLine(tc.line, func(e Event) { got = append(got, e) }); n != tc.notice {
			t.Errorf("%q: notice %t", tc.line, n)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.line, diff)
		}
	}
}

func TestCodexErrorText(t *testing.T) {
	t.Parallel()
	evs := parse(t, "codex", `{"type":"turn.failed","error":{"message":"Missing environment variable: `+"`MOCK_API_KEY`"+`."}}`)
	want := "codex is not authenticated: Missing environment variable: `MOCK_API_KEY`; set it in [agent] env or in the environment ralph runs in"
	if len(evs) != 1 || evs[0].Kind != EventError || evs[0].Text != want || evs[0].Limit != nil {
		t.Errorf("events %+v", evs)
	}
	// A transient retry that is a 503 is a notice too; the final 503 an overload.
	evs = parse(t, "codex", `{"type":"error","message":"Reconnecting... 3/5 (unexpected status 503 Service Unavailable: overloaded)"}`+"\n"+
		`{"type":"turn.failed","error":{"message":"unexpected status 503 Service Unavailable: overloaded"}}`)
	if len(evs) != 2 || evs[0].Kind != EventRetry || evs[0].Retry.Status != 503 || evs[0].Retry.Attempt != 3 ||
		evs[1].Limit == nil || evs[1].Limit.Kind != LimitOverloaded {
		t.Errorf("events %+v", evs)
	}
}

func TestCodexPermissions(t *testing.T) {
	t.Parallel()
	p := PermissionsFor("codex", []string{"go", "test", "./..."}, false)
	if diff := cmp.Diff([]string{"--sandbox", "workspace-write"}, p.Args); diff != "" || len(p.Env) != 0 {
		t.Errorf("default args (-want +got):\n%s env %v", diff, p.Env)
	}
	if !strings.Contains(strings.Join(p.Comment, " "), "go test ./...") {
		t.Errorf("the comment does not name the test command: %q", p.Comment)
	}
	full := PermissionsFor("codex", nil, true)
	if diff := cmp.Diff([]string{"--dangerously-bypass-approvals-and-sandbox"}, full.Args); diff != "" {
		t.Errorf("full args (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(full.Comment[0], "WARNING") {
		t.Errorf("full access comes without a warning: %q", full.Comment)
	}
}

func FuzzParseCodexReal(f *testing.F) {
	for _, name := range []string{"fix", "denied", "limit", "retry-429-400", "unauthenticated"} {
		b, err := os.ReadFile(codexReal + name + ".jsonl")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, in string) {
		checkEvents(t, parse(t, "codex", in))
		for _, l := range strings.Split(in, "\n") {
			codexStderrLine(l, func(e Event) {
				if e.Kind != EventRetry && e.Kind != EventDenied {
					t.Fatalf("stderr made a %s event", e.Kind)
				}
			})
		}
	})
}

// TestCodexRealOwnSandboxFails: codex 0.171.0 with bubblewrap installed
// and its CODEX_HOME under the temporary directory (where it will not link
// its codex-linux-sandbox helper) fails every command and patch in its own
// sandbox: its warning followed by the patch it could not write (standard
// error) and the command that failed (its JSON, when it prints it) are
// denials whose fix names the flag that turns that sandbox off.
func TestCodexRealOwnSandboxFails(t *testing.T) {
	t.Parallel()
	_, res := replayCodex(t, "0.171.0", "own-sandbox")
	if len(res.Denials) != 2 {
		t.Fatalf("denials %+v, want the patch's and cat calc.go's", res.Denials)
	}
	patch, cmd := res.Denials[0], res.Denials[1]
	if patch.Tool != "apply_patch" || !strings.HasSuffix(patch.Target, "/calc.go") ||
		!strings.Contains(patch.Message, "could not create PATH aliases") || !strings.Contains(patch.Fix, codexBypass) {
		t.Errorf("the patch's denial %+v", patch)
	}
	if cmd.Tool != "command_execution" || !strings.Contains(cmd.Target, "cat calc.go") ||
		!strings.Contains(cmd.Message, "bwrap: execvp codex-linux-sandbox: No such file or directory") ||
		!strings.Contains(cmd.Fix, codexBypass) {
		t.Errorf("the command's denial %+v", cmd)
	}
	// A patch that fails to write with the helper linked is codex's own
	// failure, not its sandbox's.
	var evs []Event
	codexBackend().stderrLine("Failed to write file /w/calc.go", func(e Event) { evs = append(evs, e) })
	if len(evs) != 0 {
		t.Errorf("a failed write without codex's warning gave %+v", evs)
	}
	// The same command failing for a reason of its own is no denial.
	if d := codexOwnSandboxFailed(&codexItem{Type: "command_execution", HasExitCode: true, ExitCode: 1,
		AggregatedOutput: "cat: calc.go: No such file or directory\n"}); d != nil {
		t.Errorf("a failed cat is a denial: %+v", d)
	}
}

// TestCodexConfined: what ralph adds to codex's args under its sandbox.
func TestCodexConfined(t *testing.T) {
	for _, c := range []struct {
		args, want []string
	}{
		{[]string{"--sandbox", "workspace-write", "--model", "gpt-5.5"}, []string{codexBypass, "--disable", "plugins"}},
		{[]string{"-s", "workspace-write"}, []string{codexBypass, "--disable", "plugins"}},
		{[]string{"--sandbox=workspace-write"}, []string{codexBypass, "--disable", "plugins"}},
		{[]string{"-c", `sandbox_mode="workspace-write"`}, []string{codexBypass, "--disable", "plugins"}},
		// read-only, asked or by default, stays: codex still refuses edits.
		{[]string{"--sandbox", "read-only"}, []string{"--disable", "plugins"}},
		{nil, []string{"--disable", "plugins"}},
		{[]string{"--sandbox", "workspace-write", "--sandbox", "read-only"}, []string{"--disable", "plugins"}},
		// Given already, or plugins asked for: nothing more.
		{[]string{"--sandbox", "workspace-write", codexBypass, "--enable", "plugins"}, nil},
		{[]string{"-c", "features.plugins=true"}, nil},
	} {
		if got := codexConfined(c.args, t.TempDir(), func(string) string { return "" }); !slices.Equal(got, c.want) {
			t.Errorf("codexConfined(%q) = %q, want %q", c.args, got, c.want)
		}
	}
	// No mode in the args: config.toml's sandbox_mode is codex's.
	home := t.TempDir()
	writeFile(t, filepath.Join(home, ".codex", "config.toml"), "sandbox_mode = \"workspace-write\"\n")
	none := func(string) string { return "" }
	if got := codexConfined(nil, home, none); !slices.Equal(got, []string{codexBypass, "--disable", "plugins"}) {
		t.Errorf("with sandbox_mode = workspace-write in config.toml codexConfined(nil) = %q", got)
	}
	if got := codexConfined([]string{"-s", "read-only"}, home, none); !slices.Equal(got, []string{"--disable", "plugins"}) {
		t.Errorf("-s read-only over config.toml's workspace-write: codexConfined = %q", got)
	}
}
