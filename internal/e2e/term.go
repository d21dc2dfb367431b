package e2e

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ralphloop/ralph/internal/eventually"
)

// Term is a 120×40 terminal (a tmux session on the test process's own
// server) in which a test drives ralph as a user would: it sends keys,
// reads the screen, and waits on the title ralph's UI sets to say what it
// has drawn (docs/tui.md). The test closes it at its end.
type Term struct {
	e       *E
	session string
	files   string // the terminal's own directory: its script, and what it records
	ralph   bool   // it runs a Cmd (Exit, Pid, Stty), not a shell line
}

var terms atomic.Int64

// Term runs the command in a new terminal. Once the command exits, the
// terminal records its exit status (Exit) and the terminal's modes then
// (Stty), and stays open.
func (c *Cmd) Term() *Term {
	c.e.t.Helper()
	files := c.e.t.TempDir()
	var b strings.Builder
	// The script outlives a ctrl+c sent to the command (its process group)
	// to record how the command ended; the command itself gets it as it
	// would (a trap is not inherited, an ignored signal would be). The
	// command's pid, as it is the command: a shell that writes its own pid
	// and then execs it.
	fmt.Fprintf(&b, "trap : INT\nsh -c 'echo $$ > \"$0.tmp\" && mv \"$0.tmp\" \"$0\" && exec \"$@\"' %s %s", shellQuote(filepath.Join(files, "pid")), shellQuote(c.path))
	for _, a := range c.argv() {
		b.WriteString(" " + shellQuote(a))
	}
	exit := shellQuote(filepath.Join(files, "exit"))
	// Then the exit status in a file, and in the terminal's title, which
	// tmux sets once it has drawn everything the command printed before.
	fmt.Fprintf(&b, "\ncode=$?\nstty -a > %s 2>&1\necho $code > %s.tmp && mv %s.tmp %s\nprintf '\\033]2;%s%%s\\033\\\\' $code\nexec sleep 600\n",
		shellQuote(filepath.Join(files, "stty")), exit, exit, exit, exitTitle)
	env := c.env
	if env == nil {
		env = c.e.Env()
	}
	return c.e.term(files, c.dir, env, c.with, false, b.String())
}

// TermShell runs a shell command line in a new terminal, in the test
// process's directory and the test's environment; `ralph` in it is the
// binary. For what a Cmd cannot say: output sent to a file, several
// commands in a row.
func (e *E) TermShell(line string) *Term {
	e.t.Helper()
	return e.term(e.t.TempDir(), "", e.Env(), nil, true, line+"\n")
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// inTerminal are the variables of a command's environment the terminal
// sets itself (or the shell does), which its script leaves alone.
var inTerminal = map[string]bool{"TERM": true, "TMUX": true, "TMUX_PANE": true, "COLUMNS": true, "LINES": true, "PWD": true, "OLDPWD": true, "SHLVL": true, "_": true}

var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// term starts a terminal that runs body (sh) in dir (the test process's
// when "") with env and then extra (the command's own variables), the
// binary's directory first on PATH when ralphOnPath.
// The script waits until the terminal's output is captured (Raw) before it
// runs body.
func (e *E) term(files, dir string, env, extra []string, ralphOnPath bool, body string) *Term {
	t := e.t
	t.Helper()
	if !e.needs[Tmux.name] {
		t.Fatal("e2e: the test drives a terminal; declare e2e.Tmux in its Needs")
	}
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			t.Fatal(err)
		}
	}
	gate := filepath.Join(files, "go")
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\nwhile [ ! -e %s ]; do sleep 0.02; done\ncd %s || exit 1\n", shellQuote(gate), shellQuote(dir))
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); shellName.MatchString(k) && !inTerminal[k] {
			fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(v))
		}
	}
	for _, kv := range extra { // the command's own: PWD too, when it says so
		if k, v, _ := strings.Cut(kv, "="); shellName.MatchString(k) {
			fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(v))
		}
	}
	if ralphOnPath {
		fmt.Fprintf(&b, "export PATH=%s:\"$PATH\"\n", shellQuote(filepath.Dir(e.s.bin)))
	}
	b.WriteString(body)
	script := filepath.Join(files, "run.sh")
	if err := os.WriteFile(script, []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	name := strings.NewReplacer("/", "-", ".", "-", ":", "-", " ", "-").Replace(t.Name())
	tm := &Term{e: e, session: fmt.Sprintf("%s-%d", name, terms.Add(1)), files: files, ralph: !ralphOnPath}
	// A test that closes a terminal can stop the tmux server (it exits
	// with its last session) as this one starts: start again then.
	var out []byte
	var err error
	for try := 0; try < 5; try++ {
		out, err = e.s.tmuxCmd("new-session", "-d", "-s", tm.session, "-x", "120", "-y", "40", script).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "server exited unexpectedly") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("tmux new-session: %v %s", err, out)
	}
	t.Cleanup(func() { _ = e.s.tmuxCmd("kill-session", "-t", tm.session).Run() })
	tm.tmux("pipe-pane", "-o", "-t", tm.session, "cat >> "+shellQuote(filepath.Join(files, "raw")))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return tm
}

// tmuxCmd is a command to the test process's tmux server, which reads no
// configuration: every test sees tmux's defaults.
func (s *Suite) tmuxCmd(args ...string) *exec.Cmd {
	return exec.Command("tmux", append([]string{"-L", s.tmux, "-f", "/dev/null"}, args...)...)
}

// tmux runs a tmux command on the terminal's server and fails the test if
// it fails.
func (tm *Term) tmux(args ...string) string {
	tm.e.t.Helper()
	out, err := tm.e.s.tmuxCmd(args...).CombinedOutput()
	if err != nil {
		tm.e.t.Fatalf("tmux %s: %v %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Send sends keys as tmux send-keys names them ("q", "Enter", "C-c").
func (tm *Term) Send(keys ...string) {
	tm.e.t.Helper()
	tm.tmux(append([]string{"send-keys", "-t", tm.session}, keys...)...)
}

// Paste pastes text as a terminal does (bracketed when the program asks).
func (tm *Term) Paste(text string) {
	tm.e.t.Helper()
	buf := tm.session + "-paste"
	tm.tmux("set-buffer", "-b", buf, text)
	tm.tmux("paste-buffer", "-p", "-d", "-b", buf, "-t", tm.session)
}

// Resize makes the terminal w columns by h rows.
func (tm *Term) Resize(w, h int) {
	tm.e.t.Helper()
	tm.tmux("resize-window", "-t", tm.session, "-x", strconv.Itoa(w), "-y", strconv.Itoa(h))
}

// Close closes the terminal, as a user closing its window does: what runs
// in it gets SIGHUP.
func (tm *Term) Close() {
	tm.e.t.Helper()
	tm.tmux("kill-session", "-t", tm.session)
}

// Screen is what the terminal shows now.
func (tm *Term) Screen() string {
	out, _ := tm.e.s.tmuxCmd("capture-pane", "-p", "-t", tm.session).Output()
	return string(out)
}

// Title is the terminal's title, which ralph's UI sets to what it has
// shown (docs/tui.md): "ralph · RUN_ID · seq N · idle|running|ended".
func (tm *Term) Title() string {
	out, _ := tm.e.s.tmuxCmd("display-message", "-p", "-t", tm.session, "#{pane_title}").Output()
	return strings.TrimSpace(string(out))
}

// Raw is everything written to the terminal so far, escape sequences and
// all.
func (tm *Term) Raw() string {
	b, _ := os.ReadFile(filepath.Join(tm.files, "raw"))
	return string(b)
}

// UntilEnd, given to WaitIdle, waits for the run's end.
const UntilEnd = math.MaxUint64

var titleRE = regexp.MustCompile(`^ralph · (?:\S+ · )?seq (\d+) · (idle|running|ended)$`)

// WaitIdle waits until the UI says, in its title, that it has drawn every
// event up to seq and has nothing pending, or that the run has ended and
// it has drawn the end, and returns the screen then.
func (tm *Term) WaitIdle(seq uint64) string {
	tm.e.t.Helper()
	var title string
	ok := eventually.Poll(func() bool {
		title = tm.Title()
		m := titleRE.FindStringSubmatch(title)
		if m == nil {
			return false
		}
		n, _ := strconv.ParseUint(m[1], 10, 64)
		return m[2] == "ended" || (m[2] == "idle" && n >= seq)
	})
	if !ok {
		what := "the run's end"
		if seq != UntilEnd {
			what = fmt.Sprintf("idle at seq %d", seq)
		}
		tm.e.t.Fatalf("the UI never said %s; its title is %q:\n%s", what, title, tm.Screen())
	}
	return tm.Screen()
}

// WaitScreen waits until ok holds for the screen, for what the UI shows
// that no seq names (a prompt, a dialog, a view or a move a key made, a
// running time, what ralph prints once its UI has ended), and returns the
// screen then. Keys given as resend are sent first, and again after each
// 3 s without ok (at most 10 times): a key the program did not take is
// sent again. What a run recorded is waited for with WaitIdle.
func (tm *Term) WaitScreen(what string, ok func(screen string) bool, resend ...string) string {
	tm.e.t.Helper()
	var s string
	sent, tries := time.Time{}, 0
	if !eventually.Poll(func() bool {
		if len(resend) > 0 && tries < 10 && time.Since(sent) > 3*time.Second {
			tm.Send(resend...)
			sent, tries = time.Now(), tries+1
		}
		s = tm.Screen()
		return ok(s)
	}) {
		tm.e.t.Fatalf("the screen never showed %s:\n%s", what, s)
	}
	return s
}

// WaitFor is WaitScreen for a text on the screen.
func (tm *Term) WaitFor(want string, resend ...string) string {
	tm.e.t.Helper()
	return tm.WaitScreen(strconv.Quote(want), func(s string) bool { return strings.Contains(s, want) }, resend...)
}

// exitTitle and the exit status are the terminal's title once the
// command it runs (Cmd.Term) has exited.
const exitTitle = "e2e: exited "

// Exit waits for the command the terminal runs (Cmd.Term) to exit and
// returns its exit status; the screen then shows everything it printed.
func (tm *Term) Exit() int {
	tm.e.t.Helper()
	tm.mustRunRalph("Exit")
	s := tm.e.WaitFile(filepath.Join(tm.files, "exit"))
	code, err := strconv.Atoi(s)
	if err != nil {
		tm.e.t.Fatalf("the terminal recorded exit status %q", s)
	}
	if !eventually.Poll(func() bool { return tm.Title() == exitTitle+s }) {
		tm.e.t.Fatalf("the terminal's title never said the command exited; it is %q:\n%s", tm.Title(), tm.Screen())
	}
	return code
}

// Pid waits for the command the terminal runs (Cmd.Term) to start and
// returns its pid.
func (tm *Term) Pid() int {
	tm.e.t.Helper()
	tm.mustRunRalph("Pid")
	s := tm.e.WaitFile(filepath.Join(tm.files, "pid"))
	pid, err := strconv.Atoi(s)
	if err != nil {
		tm.e.t.Fatalf("the terminal recorded pid %q", s)
	}
	return pid
}

// Stty is the terminal's modes (stty -a) once the command it runs
// (Cmd.Term) has exited: whether it left the terminal in raw mode.
func (tm *Term) Stty() string {
	tm.e.t.Helper()
	tm.Exit()
	b, err := os.ReadFile(filepath.Join(tm.files, "stty"))
	if err != nil {
		tm.e.t.Fatal(err)
	}
	return string(b)
}

func (tm *Term) mustRunRalph(what string) {
	tm.e.t.Helper()
	if !tm.ralph {
		tm.e.t.Fatalf("Term.%s: the terminal runs a shell line (TermShell), not a command", what)
	}
}
