package notify

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/config"
)

// checked parses src as ralph.toml and holds its [[notify]] tables to
// their rows, as assemble.Check does.
func checked(t *testing.T, src string) ([]config.Notify, error) {
	t.Helper()
	cfg, err := config.Parse([]byte(src), "ralph.toml", func(string) string { return "" })
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return cfg.Notify, Check(cfg.Notify, cfg.FileName())
}

// A table is held to its kind's row, each refusal one sentence with the
// config's file:line.
func TestSinkErrors(t *testing.T) {
	t.Parallel()
	const head = "[plan]\nrtfs = \"1\"\n"
	cases := []struct{ name, src, want string }{
		{"bad kind", head + "[[notify]]\nkind = \"pager\"\n", `ralph.toml:3: [[notify]] pager-1: kind "pager" is not one of terminal, desktop, webhook, command`},
		{"bad event", head + "[[notify]]\nkind = \"terminal\"\non = [\"run_end\"]\n", `ralph.toml:3: [[notify]] terminal-1: on names "run_end"`},
		{"webhook without url", head + "[[notify]]\nkind = \"terminal\"\n[[notify]]\nkind = \"webhook\"\n", `ralph.toml:5: [[notify]] webhook-2: a webhook needs url_env`},
		{"url does not parse", head + "[[notify]]\nkind = \"webhook\"\nurl = \"example.com/hook\"\n", `is not an http(s) URL`},
		{"url with userinfo", head + "[[notify]]\nkind = \"webhook\"\nurl = \"https://me:pw@example.com/hook\"\n", `https://REDACTED@example.com/hook carries a credential in clear; put the URL in an environment variable and name it with url_env instead`},
		{"url with token", head + "[[notify]]\nkind = \"webhook\"\nurl = \"https://example.com/hook?token=abc\"\n", `(query parameter token)`},
		{"slack url", head + "[[notify]]\nkind = \"webhook\"\nurl = \"https://hooks.slack.com/services/T/B/x\"\n", `url https://hooks.slack.com/… is a Slack webhook URL, which is itself a credential in clear; put the URL in an environment variable`},
		{"url and url_env", head + "[[notify]]\nkind = \"webhook\"\nurl = \"https://example.com/hook\"\nurl_env = \"U\"\n", `ralph.toml:3: [[notify]] webhook-1: a webhook has url or url_env, not both; keep url_env`},
		{"command without cmd", head + "[[notify]]\nkind = \"command\"\n", `a command sink needs cmd`},
		{"cmd on terminal", head + "[[notify]]\nkind = \"terminal\"\ncmd = [\"x\"]\n", `ralph.toml:3: [[notify]] terminal-1: cmd is for kind = "command"`},
		{"url_env on command", head + "[[notify]]\nkind = \"command\"\ncmd = [\"x\"]\nurl_env = \"U\"\n", `ralph.toml:3: [[notify]] command-1: url, url_env and secret_env are for kind = "webhook"`},
		{"retries out of range", head + "[[notify]]\nname = \"t\"\nkind = \"terminal\"\nretries = 11\n", `ralph.toml:3: [[notify]] t: retries must be between 0 and 10`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := checked(t, tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// A table gets its row's defaults: name KIND-N, timeout and retries.
func TestSinkDefaults(t *testing.T) {
	t.Parallel()
	n, err := checked(t, "[plan]\nrtfs = \"1\"\n[[notify]]\nkind = \"webhook\"\nurl_env = \"HOOK\"\n[[notify]]\nkind = \"terminal\"\ntimeout = \"2s\"\nretries = 0\n")
	if err != nil {
		t.Fatal(err)
	}
	if n[0].Name != "webhook-1" || n[0].Timeout.Duration != 10*time.Second || *n[0].Retries != 3 || n[0].Line != 3 {
		t.Errorf("notify defaults: %+v", n[0])
	}
	if n[1].Name != "terminal-2" || n[1].Timeout.Duration != 2*time.Second || *n[1].Retries != 0 || n[1].Line != 6 {
		t.Errorf("notify as set: %+v", n[1])
	}
}

// Every row is whole: a New, a default timeout, fields a sink may take.
func TestEverySinkIsAWholeRow(t *testing.T) {
	for _, name := range SinkNames() {
		s, _ := Lookup(name)
		if s.New == nil || s.Timeout <= 0 {
			t.Errorf("notify sink %q has no New or no default timeout", name)
		}
		for _, f := range s.Fields {
			if !slices.Contains(sinkFields(), f) {
				t.Errorf("notify sink %q names %q, which is not a [[notify]] field a sink may take", name, f)
			}
		}
	}
}

// undocumented are the sinks the docs do not list: docs/notify.md's and
// docs/config.md's `kind` rows name every sink, and docs/notify.md's row
// of each field a sink takes names the sink in its "applies to" column.
func undocumented(t testing.TB) []string {
	t.Helper()
	notifyDoc, err := os.ReadFile("../docs/notify.md")
	if err != nil {
		t.Fatal(err)
	}
	configDoc, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	row := func(doc []byte, key string) string {
		return string(regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(key) + "` \\|.*$").Find(doc))
	}
	var out []string
	for _, name := range SinkNames() {
		s, _ := Lookup(name)
		quoted := "`" + name + "`"
		ok := strings.Contains(row(notifyDoc, "kind"), quoted) && strings.Contains(row(configDoc, "kind"), quoted)
		for _, f := range s.Fields {
			cols := strings.Split(row(notifyDoc, f), "|")
			ok = ok && len(cols) > 2 && strings.Contains(cols[2], name)
		}
		if !ok {
			out = append(out, name)
		}
	}
	return out
}

// docs/notify.md and docs/config.md document every sink.
func TestEverySinkIsDocumented(t *testing.T) {
	if u := undocumented(t); len(u) > 0 {
		t.Errorf("the [[notify]] tables of docs/notify.md and docs/config.md lack %v", u)
	}
}
