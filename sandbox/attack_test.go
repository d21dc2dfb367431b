//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ralphloop/ralph/internal/procgroup"
	"github.com/ralphloop/ralph/internal/testenv"
)

// world is what the attacks aim at: a home with secrets, the workdir,
// a project beside it, ralph's store and key (hidden), the test process
// itself as ralph, a loopback port nobody allowed, an ssh-agent socket,
// an abstract socket of ralph's, and the hosts behind the proxy.
type world struct {
	home, wd, other, store, key, sshKey, aws string
	ralph                                    int
	port                                     string // a loopback listener not allowed
	agentSock                                string // a pathname socket outside every allowed tree
	abstract                                 string // "@name": an abstract socket of ralph's
	allowedURL, refusedURL                   string

	mu      sync.Mutex
	dialled []string
	denials []Denial
}

func newWorld(t *testing.T) *world {
	t.Helper()
	root := t.TempDir()
	w := &world{home: filepath.Join(root, "home"), ralph: os.Getpid(),
		allowedURL: "http://allowed.test/", refusedURL: "http://refused.test/"}
	w.wd = filepath.Join(w.home, "src", "project")
	w.other = filepath.Join(w.home, "src", "other")
	w.store = filepath.Join(w.home, ".local", "state", "ralph", "store")
	w.key = filepath.Join(w.home, ".local", "state", "ralph", "keys", "ralph.key")
	w.sshKey = filepath.Join(w.home, ".ssh", "id_ed25519")
	w.aws = filepath.Join(w.home, ".aws", "credentials")
	for _, f := range []string{w.sshKey, w.aws, filepath.Join(w.other, "main.go"), filepath.Join(w.store, "000001.vlog"), w.key, filepath.Join(w.wd, "README")} {
		mustWrite(t, f, "secret "+filepath.Base(f))
	}
	// ralph is non-dumpable (internal/sealenv): only a process with
	// CAP_SYS_PTRACE reads its /proc/PID/environ.
	setDumpable(t, false)
	t.Cleanup(func() { setDumpable(t, true) })
	for _, v := range []string{"HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"} {
		t.Setenv(v, w.home)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go acceptAll(ln)
	w.port = ln.Addr().String()
	w.agentSock = filepath.Join(w.home, "agent.sock")
	w.abstract = fmt.Sprintf("@ralph-attack-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, addr := range []string{w.agentSock, w.abstract} {
		u, err := net.Listen("unix", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { u.Close() })
		go acceptAll(u)
	}
	return w
}

func mustWrite(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func acceptAll(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// sandbox makes the Sandbox of mech for w (nil: off), its proxy dialling
// allowed.test to a local server and noting every name it dials.
func (w *world) sandbox(t *testing.T, mech *mechanism) *Sandbox {
	t.Helper()
	if mech == nil {
		return nil
	}
	if err := mech.probe(NetModel); err != nil {
		testenv.Need(t, mech.name, err)
	}
	s, err := newWith(Spec{Mode: Auto, Network: NetModel},
		Bounds{Workdir: w.wd, Hidden: []string{w.store, w.key}, Hosts: []string{"allowed.test"},
			StateDirs: []string{filepath.Join(w.home, ".fakecli")}, CacheRoot: filepath.Join(w.home, ".cache", "ralph")},
		func(d Denial) { w.mu.Lock(); w.denials = append(w.denials, d); w.mu.Unlock() }, mech)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { fmt.Fprintln(rw, "hello") }))
	t.Cleanup(srv.Close)
	s.proxy.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		w.mu.Lock()
		w.dialled = append(w.dialled, addr)
		w.mu.Unlock()
		if strings.HasPrefix(addr, "allowed.test:") {
			return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
		}
		return nil, fmt.Errorf("the test dials only allowed.test, not %s", addr)
	}
	return s
}

// attackRow is one escape: the attacker's arguments in w, and its
// outcome under each mechanism ("reached", "refused"; "" not tried).
type attackRow struct {
	name   string
	args   func(w *world) []string
	expect map[string]string
	check  func(t *testing.T, w *world, mech string) // more to hold after it ran
}

const (
	reached = "reached"
	refused = "refused"
)

// mechanisms are the columns: off, then each mechanism.
var attackColumns = []struct {
	name string
	mech *mechanism
}{{"off", nil}, {"landlock", mechLandlock}, {"bwrap+landlock", mechBwrapLandlock}, {"bwrap", mechBwrap}}

// all gives every sandboxed column the same outcome, off reaching.
func all(outcome string) map[string]string {
	return map[string]string{"off": reached, "landlock": outcome, "bwrap+landlock": outcome, "bwrap": outcome}
}

func attackRows() []attackRow {
	pathSockets := reached // Landlock governs connecting to a pathname socket from ABI 9
	if landlockABI() >= 9 {
		pathSockets = refused
	}
	return []attackRow{
		{name: "read ~/.ssh/id_ed25519", args: func(w *world) []string { return []string{"read", w.sshKey} }, expect: all(refused)},
		{name: "read ~/.aws/credentials", args: func(w *world) []string { return []string{"read", w.aws} }, expect: all(refused)},
		{name: "read another project", args: func(w *world) []string { return []string{"read", filepath.Join(w.other, "main.go")} }, expect: all(refused)},
		{name: "write outside the workdir", args: func(w *world) []string { return []string{"write", filepath.Join(w.other, "planted.go")} }, expect: all(refused)},
		{name: "write into the store", args: func(w *world) []string { return []string{"write", filepath.Join(w.store, "000002.vlog")} }, expect: all(refused)},
		{name: "replace ralph's key", args: func(w *world) []string { return []string{"replace", filepath.Join(w.wd, "forged.key"), w.key} }, expect: all(refused),
			check: func(t *testing.T, w *world, mech string) {
				if b, _ := os.ReadFile(w.key); mech != "off" && string(b) != "secret ralph.key" {
					t.Errorf("the key now holds %q", b)
				}
			}},
		{name: "read ralph's /proc/PID/environ (ralph is non-dumpable)", args: func(w *world) []string { return []string{"environ", strconv.Itoa(w.ralph)} }, expect: all(refused)},
		{name: "open ralph's /proc/PID/mem", args: func(w *world) []string { return []string{"mem", strconv.Itoa(w.ralph)} }, expect: all(refused)},
		{name: "signal ralph", args: func(w *world) []string { return []string{"signal", strconv.Itoa(w.ralph)} }, expect: all(refused)},
		{name: "connect to a loopback port not allowed", args: func(w *world) []string { return []string{"dial", w.port} },
			expect: map[string]string{"off": reached, "landlock": refused, "bwrap+landlock": refused, "bwrap": reached}},
		{name: "GET an allowed host through the proxy", args: func(w *world) []string { return []string{"get", w.allowedURL} },
			expect: map[string]string{"landlock": reached, "bwrap+landlock": reached, "bwrap": reached}},
		{name: "GET a host not allowed through the proxy", args: func(w *world) []string { return []string{"get", w.refusedURL} },
			expect: map[string]string{"landlock": refused, "bwrap+landlock": refused, "bwrap": refused}, check: checkProxyRefusal},
		{name: "read a key through a symlink in the workdir", args: func(w *world) []string { return []string{"symlink", w.sshKey, filepath.Join(w.wd, "link")} }, expect: all(refused)},
		{name: "read a key through a hardlink in the workdir", args: func(w *world) []string { return []string{"hardlink", w.sshKey, filepath.Join(w.wd, "hardlink")} }, expect: all(refused)},
		{name: "setsid, fork twice, read ~/.ssh/id_ed25519", args: func(w *world) []string { return []string{"escape", w.sshKey} }, expect: all(refused)},
		{name: "find ssh-agent in SSH_AUTH_SOCK", args: func(w *world) []string { return []string{"env", "SSH_AUTH_SOCK"} }, expect: all(refused)},
		{name: "connect to ssh-agent's socket by its path", args: func(w *world) []string { return []string{"unix", w.agentSock} },
			expect: map[string]string{"off": reached, "landlock": pathSockets, "bwrap+landlock": refused, "bwrap": refused}},
		{name: "connect to an abstract socket of ralph's", args: func(w *world) []string { return []string{"unix", w.abstract} },
			expect: map[string]string{"off": reached, "landlock": refused, "bwrap+landlock": refused, "bwrap": reached}},
	}
}

// checkProxyRefusal: the refusal is a Denial naming the host and the
// line that allows it, and the host was never dialled (so never
// resolved).
func checkProxyRefusal(t *testing.T, w *world, mech string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	want := Denial{What: "connect refused.test:80", Allow: `hosts = ["refused.test"]`}
	found := false
	for _, d := range w.denials {
		found = found || d == want
	}
	if !found {
		t.Errorf("%s: denials %v lack %v", mech, w.denials, want)
	}
	for _, a := range w.dialled {
		if strings.HasPrefix(a, "refused.test") {
			t.Errorf("%s: the proxy dialled %s, which it refused", mech, a)
		}
	}
}

// TestAttacks runs every escape under each mechanism this machine has
// (off as the control: each attack works there) and prints the table
// (go test -v -run TestAttacks ./sandbox/) that docs/sandbox.md shows.
func TestAttacks(t *testing.T) {
	rows := attackRows()
	got := map[string]map[string]string{}
	for _, col := range attackColumns {
		t.Run(col.name, func(t *testing.T) {
			w := newWorld(t)
			w.mu.Lock()
			w.denials = nil
			w.mu.Unlock()
			s := w.sandbox(t, col.mech)
			for _, r := range rows {
				want := r.expect[col.name]
				if want == "" {
					continue
				}
				outcome, out := runAttack(t, s, w, r.args(w))
				if got[r.name] == nil {
					got[r.name] = map[string]string{}
				}
				got[r.name][col.name] = outcome
				if outcome != want {
					t.Errorf("%s under %s: %s, want %s (%s)", r.name, col.name, outcome, want, out)
				}
				if r.check != nil {
					r.check(t, w, col.name)
				}
			}
		})
	}
	t.Logf("the attack table (landlock ABI %d):\n%s", landlockABI(), attackTable(rows, got))
}

// runAttack runs the attacker with args, confined by s, through
// RunContained, and says whether it got through.
func runAttack(t *testing.T, s *Sandbox, w *world, args []string) (outcome, output string) {
	t.Helper()
	cmd := attacker(t, args...)
	cmd.Dir = w.wd
	cmd.Env = append(cmd.Env, "SSH_AUTH_SOCK="+w.agentSock)
	var out procgroup.CappedBuffer
	out.Limit = 4 << 10
	cmd.Stdout, cmd.Stderr = &out, &out
	_, err := RunContained(With(t.Context(), s), cmd, time.Second, procgroup.StartOptions{})
	switch {
	case err == nil && strings.Contains(out.String(), "reached"):
		return reached, out.String()
	case err != nil && strings.Contains(out.String(), "refused:"):
		return refused, strings.TrimSpace(out.String())
	}
	t.Fatalf("%v: the attacker did not run (%v): %s", args, err, out.String())
	return "", ""
}

func attackTable(rows []attackRow, got map[string]map[string]string) string {
	var b strings.Builder
	b.WriteString("| attack |")
	for _, c := range attackColumns {
		b.WriteString(" " + c.name + " |")
	}
	b.WriteString("\n|---|")
	for range attackColumns {
		b.WriteString("---|")
	}
	for _, r := range rows {
		b.WriteString("\n| " + r.name + " |")
		for _, c := range attackColumns {
			v := got[r.name][c.name]
			if v == "" {
				v = "–"
			}
			b.WriteString(" " + v + " |")
		}
	}
	return b.String() + "\n"
}

func setDumpable(t *testing.T, on bool) {
	t.Helper()
	v := uintptr(0)
	if on {
		v = 1
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, v, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
}
