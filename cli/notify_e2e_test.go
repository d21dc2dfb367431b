package cli_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/godbus/dbus/v5"

	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/notify"
)

const notifyLoop = `[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "hi"}))'
[[stop]]
name = "once"
kind = "max_iterations"
max = 1
`

func writeConfig(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ralph.toml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The terminal sink writes OSC 9, OSC 777 and the bell to the terminal
// ralph runs in: here a tmux pane, whose raw output pipe-pane captures
// (inside tmux the OSCs travel in its passthrough).
var _ = suite.Add(e2e.Test{Name: "NotifyTerminalInTmux", Serial: true, Needs: []e2e.Need{e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
	dir := writeConfig(t, notifyLoop+"[[notify]]\nkind = \"terminal\"\non = [\"run_ended\"]\n")
	// Its output to a file: what reaches the terminal is the sink's.
	tm := e.TermShell("cd " + dir + " && XDG_RUNTIME_DIR=" + dir + " ralph run --no-tui > run.out 2>&1; echo EXIT $?; sleep 60")
	tm.WaitFor("EXIT 3")
	var got string
	waitUntil(t, "the pane's raw output", func() bool {
		got = tm.Raw()
		return strings.Contains(got, "EXIT 3")
	})
	for _, want := range []string{
		"\x1bPtmux;\x1b\x1b]9;ralph: run ",
		" stopped after 1 iteration(s) ($0.0000): limit by once — reached max_iterations 1\x07\x1b\\",
		"\x1bPtmux;\x1b\x1b]777;notify;ralph: run stopped;ralph: run ",
		"\x1b\\\a",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("pane output lacks %q:\n%q", want, got)
		}
	}
}})

// A webhook gets the run's end as JSON with its signature; a webhook that
// fails changes no exit code and is recorded on the chain as NotifyFailed.
var _ = suite.Add(e2e.Test{Name: "NotifyWebhook", Serial: true, Run: func(t *testing.T, e *e2e.E) {
	var mu sync.Mutex
	var body []byte
	var sig string
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		body, sig = b, r.Header.Get(notify.SignatureHeader)
		mu.Unlock()
	}))
	defer ok.Close()
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusGone) }))
	defer gone.Close()
	dir := writeConfig(t, notifyLoop+`[[notify]]
kind = "webhook"
url_env = "HOOK_URL"
secret_env = "HOOK_KEY"
[[notify]]
name = "gone"
kind = "webhook"
url = "`+gone.URL+`/hook"
`)
	env := []string{"HOOK_URL=" + ok.URL, "HOOK_KEY=s3cret"}
	_, stderr, code := e.Ralph("run", "--no-tui", filepath.Join(dir, "ralph.toml")).With(env...).Run()
	if code != 3 {
		t.Fatalf("exit %d, want 3 (the limit), stderr %s", code, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	var ev notify.Event
	if err := json.Unmarshal(body, &ev); err != nil || ev.Event != notify.RunEnded || ev.Class != "limit" || ev.Condition != "once" ||
		!strings.Contains(ev.Text, "stopped after 1 iteration(s)") {
		t.Errorf("body %s (%v)", body, err)
	}
	if sig != notify.Sign([]byte("s3cret"), body) {
		t.Errorf("signature %q", sig)
	}
	if !strings.Contains(stderr, "notification failed") || !strings.Contains(stderr, "answered 410 Gone; check the URL") {
		t.Errorf("stderr does not log the failure:\n%s", stderr)
	}
	out, _, code := e.Ralph("chain", "show", "--store", filepath.Join(dir, ".ralph"), "--json").With(env...).Run()
	if code != 0 || !strings.Contains(out, `"action_type":"NotifyFailed"`) || !strings.Contains(out, "answered 410 Gone") {
		t.Errorf("chain show (exit %d) has no NotifyFailed:\n%s", code, out)
	}
}})

// Bad input is refused before the run, in one sentence with the fix.
var _ = suite.Add(e2e.Test{Name: "ReachBadInput", Serial: true, Run: func(t *testing.T, e *e2e.E) {
	cases := []struct{ name, src, want string }{
		{"credential in clear", notifyLoop + "[[notify]]\nkind = \"webhook\"\nurl = \"https://bot:pw@chat.example/hook\"\n",
			"ralph.toml:7: [[notify]] webhook-1: url https://REDACTED@chat.example/hook carries a credential in clear; put the URL in an environment variable and name it with url_env instead\n"},
		{"url does not parse", notifyLoop + "[[notify]]\nkind = \"webhook\"\nurl_env = \"HOOK_URL\"\n",
			"ralph.toml:7: [[notify]] webhook-1: HOOK_URL holds \"ftp//x\" is not an http(s) URL; write it like https://example.com/hook\n"},
		{"hook not found", notifyLoop + "[[hook]]\nat = \"before_iteration\"\ncmd = [\"ralph-no-such-hook\"]\n",
			"ralph.toml:7: [[hook]] before_iteration-1: command \"ralph-no-such-hook\" is not found; install it, fix the name or write its path (relative paths start at the workdir)\n"},
	}
	for _, tc := range cases {
		e.Run(tc.name, func(t *testing.T, e *e2e.E) {
			dir := writeConfig(t, tc.src)
			env := []string{"HOOK_URL=ftp//x"}
			_, stderr, code := e.Ralph("run", "--no-tui", filepath.Join(dir, "ralph.toml")).With(env...).Run()
			if code != 2 || !strings.HasSuffix(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q, want it to end with %q", code, stderr, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, ".ralph")); err == nil {
				t.Error("a refused run left a store behind")
			}
		})
	}
}})

// desktopDaemon owns org.freedesktop.Notifications on a private session
// bus (a real dbus-daemon) and keeps the summaries it is sent.
type desktopDaemon struct {
	mu        sync.Mutex
	summaries []string
}

func (d *desktopDaemon) Notify(app string, replaces uint32, icon, summary, body string, actions []string,
	hints map[string]dbus.Variant, timeout int32) (uint32, *dbus.Error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.summaries = append(d.summaries, app+"|"+summary+"|"+body)
	return uint32(len(d.summaries)), nil
}

// The desktop sink reaches the notification service on the session bus
// DBUS_SESSION_BUS_ADDRESS names.
var _ = suite.Add(e2e.Test{Name: "NotifyDesktop", Serial: true, Needs: []e2e.Need{e2e.Tool("dbus-daemon")}, Run: func(t *testing.T, e *e2e.E) {
	bus := exec.Command("dbus-daemon", "--session", "--nofork", "--print-address=1", "--address=unix:dir="+t.TempDir())
	out, err := bus.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bus.Process.Kill(); _ = bus.Wait() }()
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr = strings.TrimSpace(addr)
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	d := &desktopDaemon{}
	if err := conn.Export(d, "/org/freedesktop/Notifications", "org.freedesktop.Notifications"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.RequestName("org.freedesktop.Notifications", dbus.NameFlagDoNotQueue); err != nil {
		t.Fatal(err)
	}
	dir := writeConfig(t, notifyLoop+"[[notify]]\nkind = \"desktop\"\n")
	env := []string{"DBUS_SESSION_BUS_ADDRESS=" + addr}
	if _, stderr, code := e.Ralph("run", "--no-tui", filepath.Join(dir, "ralph.toml")).With(env...).Run(); code != 3 || strings.Contains(stderr, "notification failed") {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.summaries) != 1 || !strings.HasPrefix(d.summaries[0], "ralph|ralph: run stopped|ralph: run ") {
		t.Errorf("notifications %q", d.summaries)
	}
}})

// A terminal attached to a detached run (which has no terminal of its own)
// gets the run's terminal notifications: here its end, after the attached
// UI aborted it.
var _ = suite.Add(e2e.Test{Name: "NotifyAttachedTerminal", Serial: true, Needs: []e2e.Need{e2e.Tmux}, Run: func(t *testing.T, e *e2e.E) {
	dir := writeConfig(t, `[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "hi"}))'
[loop]
delay = "300ms"
[[stop]]
kind = "max_iterations"
max = 1000
[[notify]]
kind = "terminal"
`)
	store := filepath.Join(dir, ".ralph")
	out, errOut, code := e.Ralph("run", filepath.Join(dir, "ralph.toml"), "--detach", "--store", store).Run()
	m := startedRe.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("run --detach: exit %d\n%s%s", code, out, errOut)
	}
	a := e.Ralph("attach", m[1], "--store", store).Term()
	waitShown(t, a, store, "Running")
	a.Send("a")
	a.WaitFor("Abort the run?")
	a.Send("y")
	want := "\x1bPtmux;\x1b\x1b]9;ralph: run " + m[1] + " aborted after "
	waitUntil(t, "the attached terminal's notification", func() bool { return strings.Contains(a.Raw(), want) })
	// The detached run has no terminal: its own terminal sink failed, on the record.
	waitUntil(t, "the detached run's terminal sink failing on the record", func() bool {
		chain, _, _ := e.Ralph("chain", "show", "--store", store).Run()
		return strings.Contains(chain, "NotifyFailed terminal-1 FAILED (no terminal to notify (a detached run has none)")
	})
}})
