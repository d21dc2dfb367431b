package config

import (
	"strings"
	"testing"
	"time"
)

func TestReachErrors(t *testing.T) {
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
		{"command without cmd", head + "[[notify]]\nkind = \"command\"\n", `a command sink needs cmd`},
		{"cmd on terminal", head + "[[notify]]\nkind = \"terminal\"\ncmd = [\"x\"]\n", `cmd is for kind = "command"`},
		{"hook bad point", head + "[[hook]]\nat = \"before_all\"\ncmd = [\"x\"]\n", `ralph.toml:3: [[hook]] before_all-1: at "before_all" is not one of before_iteration`},
		{"hook no cmd", head + "[[hook]]\nat = \"on_stop\"\n", `cmd is required`},
		{"hook bad mode", head + "[[hook]]\nat = \"on_stop\"\ncmd = [\"x\"]\non_failure = \"block\"\n", `on_failure "block" is not one of warn, fail_iteration, pause`},
		{"fail_iteration at on_stop", head + "[[hook]]\nat = \"on_stop\"\ncmd = [\"x\"]\non_failure = \"fail_iteration\"\n", `applies at before_iteration and after_iteration only`},
		{"pause at on_stop", head + "[[hook]]\nat = \"on_stop\"\ncmd = [\"x\"]\non_failure = \"pause\"\n", `cannot apply at on_stop`},
		{"unknown hook key", head + "[[hook]]\nat = \"on_stop\"\ncmd = [\"x\"]\nwhen = 1\n", `ralph.toml:6: unknown key hook.when`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.src), "ralph.toml", noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestReachDefaults(t *testing.T) {
	t.Parallel()
	src := "[plan]\nrtfs = \"1\"\n[[notify]]\nkind = \"webhook\"\nurl_env = \"HOOK\"\n[[hook]]\nat = \"after_iteration\"\ncmd = [\"true\"]\n"
	c, err := Parse([]byte(src), "ralph.toml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	n, h := c.Notify[0], c.Hook[0]
	if n.Name != "webhook-1" || n.Timeout.Duration != 10*time.Second || *n.Retries != 3 || n.Line != 3 {
		t.Errorf("notify defaults: %+v", n)
	}
	if h.Name != "after_iteration-1" || h.OnFailure != "warn" || h.Timeout.Duration != time.Minute || h.Line != 6 {
		t.Errorf("hook defaults: %+v", h)
	}
}

// The run's config snapshot (what resume reads back) keeps the sinks and
// hooks as written.
func TestReachSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	src := "[plan]\nrtfs = \"1\"\n[[notify]]\nkind = \"webhook\"\nurl_env = \"HOOK\"\nsecret_env = \"KEY\"\non = [\"run_ended\"]\nretries = 0\n" +
		"[[notify]]\nkind = \"command\"\ncmd = [\"./n.sh\"]\n[[hook]]\nat = \"before_iteration\"\ncmd = [\"./h.sh\", \"x\"]\non_failure = \"pause\"\ntimeout = \"5s\"\n"
	c, err := Parse([]byte(src), "ralph.toml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse([]byte(c.Snapshot()), "snap.toml", noEnv)
	if err != nil {
		t.Fatalf("snapshot does not parse: %v\n%s", err, c.Snapshot())
	}
	n, h := back.Notify, back.Hook
	if len(n) != 2 || n[0].URLEnv != "HOOK" || n[0].SecretEnv != "KEY" || *n[0].Retries != 0 || n[0].On[0] != "run_ended" || n[1].Cmd[0] != "./n.sh" {
		t.Errorf("notify back %+v", n)
	}
	if len(h) != 1 || h[0].OnFailure != "pause" || h[0].Timeout.Duration != 5*time.Second || h[0].Cmd[1] != "x" {
		t.Errorf("hook back %+v", h)
	}
}
