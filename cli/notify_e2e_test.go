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

	"github.com/ralphloop/ralph/internal/testenv"
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
func TestE2ENotifyTerminalInTmux(t *testing.T) {
	skipWithoutBinary(t)
	dir := writeConfig(t, notifyLoop+"[[notify]]\nkind = \"terminal\"\non = [\"run_ended\"]\n")
	raw, start := filepath.Join(dir, "raw.out"), filepath.Join(dir, "go")
	tm := newTmux(t, "cd "+dir+" && while [ ! -e "+start+" ]; do sleep 0.05; done; XDG_RUNTIME_DIR="+dir+" "+ralphBin+" run --no-tui > run.out 2>&1; echo EXIT $?; sleep 60")
	if out, err := exec.Command("tmux", "pipe-pane", "-o", "-t", tm.session, "cat >> "+raw).CombinedOutput(); err != nil {
		t.Fatalf("tmux pipe-pane: %v %s", err, out)
	}
	if err := os.WriteFile(start, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tm.waitFor("EXIT 3")
	var got string
	waitUntil(t, "the pane's raw output", func() bool {
		b, _ := os.ReadFile(raw)
		got = string(b)
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
}

// A webhook gets the run's end as JSON with its signature; a webhook that
// fails changes no exit code and is recorded on the chain as NotifyFailed.
func TestE2ENotifyWebhook(t *testing.T) {
	skipWithoutBinary(t)
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
	env := append(isolatedEnv(dir), "HOOK_URL="+ok.URL, "HOOK_KEY=s3cret")
	_, stderr, code := runCommand(t, ralphBin, "", env, "run", "--no-tui", filepath.Join(dir, "ralph.toml"))
	if code != 3 {
		t.Fatalf("exit %d, want 3 (the limit), stderr %s", code, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	var e notify.Event
	if err := json.Unmarshal(body, &e); err != nil || e.Event != notify.RunEnded || e.Class != "limit" || e.Condition != "once" ||
		!strings.Contains(e.Text, "stopped after 1 iteration(s)") {
		t.Errorf("body %s (%v)", body, err)
	}
	if sig != notify.Sign([]byte("s3cret"), body) {
		t.Errorf("signature %q", sig)
	}
	if !strings.Contains(stderr, "notification failed") || !strings.Contains(stderr, "answered 410 Gone; check the URL") {
		t.Errorf("stderr does not log the failure:\n%s", stderr)
	}
	out, _, code := runCommand(t, ralphBin, "", env, "chain", "show", "--store", filepath.Join(dir, ".ralph"), "--json")
	if code != 0 || !strings.Contains(out, `"action_type":"NotifyFailed"`) || !strings.Contains(out, "answered 410 Gone") {
		t.Errorf("chain show (exit %d) has no NotifyFailed:\n%s", code, out)
	}
}

// Bad input is refused before the run, in one sentence with the fix.
func TestE2EReachBadInput(t *testing.T) {
	skipWithoutBinary(t)
	cases := []struct{ name, src, want string }{
		{"credential in clear", notifyLoop + "[[notify]]\nkind = \"webhook\"\nurl = \"https://bot:pw@chat.example/hook\"\n",
			"ralph.toml:7: [[notify]] webhook-1: url https://REDACTED@chat.example/hook carries a credential in clear; put the URL in an environment variable and name it with url_env instead\n"},
		{"url does not parse", notifyLoop + "[[notify]]\nkind = \"webhook\"\nurl_env = \"HOOK_URL\"\n",
			"ralph.toml:7: [[notify]] webhook-1: HOOK_URL holds \"ftp//x\" is not an http(s) URL; write it like https://example.com/hook\n"},
		{"hook not found", notifyLoop + "[[hook]]\nat = \"before_iteration\"\ncmd = [\"ralph-no-such-hook\"]\n",
			"ralph.toml:7: [[hook]] before_iteration-1: command \"ralph-no-such-hook\" is not found; install it, fix the name or write its path (relative paths start at the workdir)\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeConfig(t, tc.src)
			env := append(isolatedEnv(dir), "HOOK_URL=ftp//x")
			_, stderr, code := runCommand(t, ralphBin, "", env, "run", "--no-tui", filepath.Join(dir, "ralph.toml"))
			if code != 2 || !strings.HasSuffix(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q, want it to end with %q", code, stderr, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, ".ralph")); err == nil {
				t.Error("a refused run left a store behind")
			}
		})
	}
}

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
func TestE2ENotifyDesktop(t *testing.T) {
	skipWithoutBinary(t)
	testenv.Tool(t, "dbus-daemon") // apt-get install dbus
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
	env := append(isolatedEnv(dir), "DBUS_SESSION_BUS_ADDRESS="+addr)
	if _, stderr, code := runCommand(t, ralphBin, "", env, "run", "--no-tui", filepath.Join(dir, "ralph.toml")); code != 3 || strings.Contains(stderr, "notification failed") {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.summaries) != 1 || !strings.HasPrefix(d.summaries[0], "ralph|ralph: run stopped|ralph: run ") {
		t.Errorf("notifications %q", d.summaries)
	}
}

// A terminal attached to a detached run (which has no terminal of its own)
// gets the run's terminal notifications: here its end, after the attached
// UI aborted it.
func TestE2ENotifyAttachedTerminal(t *testing.T) {
	skipWithoutBinary(t)
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
	out, errOut, code := runBinary(t, ralphBin, "", "run", filepath.Join(dir, "ralph.toml"), "--detach", "--store", store)
	m := startedRe.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("run --detach: exit %d\n%s%s", code, out, errOut)
	}
	raw, start := filepath.Join(dir, "raw.out"), filepath.Join(dir, "go")
	a := newTmux(t, "while [ ! -e "+start+" ]; do sleep 0.05; done; "+ralphBin+" attach "+m[1]+" --store "+store+"; sleep 60")
	if out, err := exec.Command("tmux", "pipe-pane", "-o", "-t", a.session, "cat >> "+raw).CombinedOutput(); err != nil {
		t.Fatalf("tmux pipe-pane: %v %s", err, out)
	}
	writeFile(t, start, "")
	a.waitFor("Running")
	a.send("a")
	a.waitFor("Abort the run?")
	a.send("y")
	want := "\x1bPtmux;\x1b\x1b]9;ralph: run " + m[1] + " aborted after "
	waitUntil(t, "the attached terminal's notification", func() bool {
		b, _ := os.ReadFile(raw)
		return strings.Contains(string(b), want)
	})
	// The detached run has no terminal: its own terminal sink failed, on the record.
	waitUntil(t, "the detached run's terminal sink failing on the record", func() bool {
		chain, _, _ := runBinary(t, ralphBin, "", "chain", "show", "--store", store)
		return strings.Contains(chain, "NotifyFailed terminal-1 FAILED (no terminal to notify (a detached run has none)")
	})
}
