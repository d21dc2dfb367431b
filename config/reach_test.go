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

// [[hook]] gets its defaults here; [[notify]] is decoded with its line.
func TestReachDefaults(t *testing.T) {
	t.Parallel()
	src := "[plan]\nrtfs = \"1\"\n[[notify]]\nkind = \"webhook\"\nurl_env = \"HOOK\"\n[[hook]]\nat = \"after_iteration\"\ncmd = [\"true\"]\n"
	c, err := Parse([]byte(src), "ralph.toml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	n, h := c.Notify[0], c.Hook[0]
	if n.Line != 3 || n.Name != "" || n.Retries != nil { // notify's rows fill its defaults (notify.Check)
		t.Errorf("notify decoded as %+v", n)
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
