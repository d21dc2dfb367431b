package cli_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/sandbox"
)

// attackLoop is one iteration of the stand-in claude, whose first call
// runs testdata/attacks.py (FAKE_AGENT_EACH) in the workdir; %s is the
// [sandbox] section.
const attackLoop = `[intent]
goal = "Try every escape"
prompt_file = "PROMPT.md"
[agent]
cli = "claude"
args = ["--permission-mode", "acceptEdits"]
timeout = "2m"
[loop]
workdir = "."
[[stop]]
name = "once"
kind = "max_iterations"
max = 1
%s`

// attackWant is what every attack must come to under a sandbox: refused,
// but for reaching the allowed host through the proxy, and the git hooks
// and fsmonitor the agent may plant in its own .git (that ralph's git
// never runs them is checked after the run).
func attackWant(name string) string {
	switch name {
	case "reach-allowed-host":
		return "allowed"
	case "plant-git-hook":
		return "planted"
	}
	return "refused"
}

// systemPython is Debian's python3, under /usr, which every sandbox lets
// a process read (a python3 of the user's own, as pyenv's under ~, is not).
const systemPython = "/usr/bin/python3"

// The attacks every run must show, one line each in attacks.out.
var attackNames = []string{"read-ssh-key", "read-aws-credentials", "read-other-project", "write-outside-workdir",
	"write-into-store", "replace-key", "read-ralph-environ", "read-ralph-mem", "signal-ralph",
	"connect-loopback-port", "reach-allowed-host", "reach-unlisted-host", "symlink-out", "hardlink-out",
	"setsid-double-fork", "read-store-through-socket", "abort-through-socket", "reach-ssh-agent", "plant-git-hook"}

// mechanismNeed is what a mode needs of this machine, asked of the
// sandbox package itself (New probes by really starting what it would
// use).
func mechanismNeed(mode sandbox.Mode) e2e.Need {
	return e2e.Probe("sandbox mode "+string(mode), func(dir string) error {
		s, err := sandbox.New(sandbox.Spec{Mode: mode}, sandbox.Bounds{Workdir: dir}, nil)
		if err == nil {
			err = s.Close()
		}
		return err
	})
}

// SandboxAttacks runs, under each mode this machine has, a stand-in agent
// that tries every escape issue 34 names (testdata/attacks.py) inside a
// real ralph run: every one is refused but the allowed host, the run ends
// done, its chain verifies, and the hooks the agent planted in .git never
// ran. The table of outcomes is logged for docs/sandbox.md.
var _ = suite.Add(e2e.Test{Name: "SandboxAttacks", Needs: []e2e.Need{e2e.File(systemPython), e2e.Tool("git")},
	Run: func(t *testing.T, e *e2e.E) {
		for _, mode := range []sandbox.Mode{sandbox.Landlock, sandbox.Bwrap, sandbox.Auto} {
			if mode == sandbox.Bwrap && os.Geteuid() == 0 {
				// ralph as root drops every capability before it starts a
				// process (internal/sealenv), so bwrap cannot make its
				// namespaces and the mode is refused (SandboxBwrapAsRoot);
				// auto takes landlock. sandbox's own TestAttacks runs bwrap.
				continue
			}
			e.Run(string(mode), func(t *testing.T, e *e2e.E) { runAttacks(t, e, mode) }, mechanismNeed(mode))
		}
	}})

func runAttacks(t *testing.T, e *e2e.E, mode sandbox.Mode) {
	home := t.TempDir()
	wd, other, state := filepath.Join(home, "proj"), filepath.Join(home, "other"), t.TempDir()
	for path, text := range map[string]string{
		filepath.Join(home, ".ssh", "id_ed25519"):  "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n",
		filepath.Join(home, ".aws", "credentials"): "[default]\naws_secret_access_key = secret\n",
		filepath.Join(other, "secret.txt"):         "another project's secret\n",
		filepath.Join(wd, "PROMPT.md"):             "Try every escape.\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, text)
	}
	gitInit(t, wd)
	allowed, refusedPort := listen(t), listen(t)
	agentSock := sshAgentSocket(t)
	attacks, err := filepath.Abs(filepath.Join("testdata", "attacks.py"))
	if err != nil {
		t.Fatal(err)
	}
	store, keys, marker := filepath.Join(t.TempDir(), "store"), filepath.Join(e.ConfigHome(), "ralph", "keys"), filepath.Join(home, "marker")
	section := fmt.Sprintf("[sandbox]\nmode = %q\nread = [%q, %q]\nwrite = [%q]\nhosts = [%q]\n",
		mode, filepath.Dir(fakeAgentBin(t)), filepath.Dir(attacks), state, allowed)
	writeFile(t, filepath.Join(wd, "ralph.toml"), fmt.Sprintf(attackLoop, section))
	cmd := e.Ralph("run", "--no-tui", "--store", store).In(wd).With(
		"HOME="+home, "PATH="+fakeAgentBin(t)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FAKE_AGENT_STATE="+state, "FAKE_AGENT_EACH="+systemPython+" "+attacks+" 2>attacks.err", "SSH_AUTH_SOCK="+agentSock,
		"ATTACK_OUT="+filepath.Join(wd, "attacks.out"), "ATTACK_HOME="+home,
		"ATTACK_OTHER="+filepath.Join(other, "secret.txt"), "ATTACK_STORE="+store, "ATTACK_KEYS="+keys,
		"ATTACK_PIDFILE="+filepath.Join(wd, "ralph.pid"), "ATTACK_PORT="+portOf(t, refusedPort),
		"ATTACK_ALLOWED="+allowed, "ATTACK_MARKER="+marker).Start()
	writeFile(t, filepath.Join(wd, "ralph.pid"), strconv.Itoa(cmd.Pid())+"\n")
	out := cmd.Rest()
	// One iteration, then the limit: exit 3.
	if err := cmd.Wait(); exitCode(err) != 3 || !strings.Contains(out, "sandbox: ") {
		t.Fatalf("run under %s: %v\n%s\n%s", mode, err, out, cmd.Stderr())
	}
	got := readAttacks(t, filepath.Join(wd, "attacks.out"))
	onDisk(got, "write-outside-workdir", filepath.Join(home, "pwned"))
	onDisk(got, "write-into-store", filepath.Join(store, "pwned"))
	var table strings.Builder
	fmt.Fprintf(&table, "\n| attack (%s) | outcome | what happened |\n|---|---|---|\n", mechanismOf(out))
	for _, name := range attackNames {
		line, ok := got[name]
		outcome, detail, _ := strings.Cut(line, " ")
		fmt.Fprintf(&table, "| %s | %s | %s |\n", name, outcome, detail)
		if !ok || outcome != attackWant(name) {
			t.Errorf("%s under %s: %q, want %s", name, mode, line, attackWant(name))
		}
	}
	t.Log(table.String())
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		b, _ := os.ReadFile(marker)
		t.Errorf("ralph's git ran what the agent planted in .git: %s", b)
	}
	// The proxy's refusal is on the agent call that made it, with the
	// line that would allow it.
	if show, errOut, code := e.Ralph("chain", "show", "--json", "--store", store).Run(); code != 0 ||
		!strings.Contains(show, "sandbox_denied") || !strings.Contains(show, `hosts = [\"not-on-the-list.example\"]`) {
		t.Errorf("chain show: exit %d %s\nno sandbox_denied naming not-on-the-list.example on the call:\n%s", code, errOut, show[max(0, len(show)-3000):])
	}
	if o, errOut, code := e.Ralph("chain", "verify", "--store", store).Run(); code != 0 {
		t.Errorf("chain verify after the attacks: exit %d\n%s\n%s", code, o, errOut)
	}
}

// onDisk judges a write by the disk: under bwrap a path outside the view
// may be written in the sandbox's own tmpfs, which goes with it; the
// write escaped only if path is on the disk after the run.
func onDisk(got map[string]string, name, path string) {
	if line := got[name]; strings.HasPrefix(line, "escaped") {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			got[name] = "refused written inside the sandbox's own view only: " + path + " is not on the disk"
		}
	}
}

// readAttacks is attacks.out as name → "outcome detail".
func readAttacks(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		errs, _ := os.ReadFile(filepath.Join(filepath.Dir(path), "attacks.err"))
		t.Fatalf("the attacks wrote no results: %v\n%s", err, errs)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, rest, _ := strings.Cut(line, " ")
		if name == "attack-suite" || !slices.Contains(attackNames, name) {
			t.Errorf("attacks.out: %s", line)
			continue
		}
		if prev, dup := got[name]; dup && !strings.HasPrefix(prev, "refused") {
			continue // the first that got through stands
		}
		got[name] = rest
	}
	return got
}

// mechanismOf is what the run's first line says confined it.
func mechanismOf(out string) string {
	_, after, _ := strings.Cut(out, "sandbox: ")
	return strings.Fields(after)[0]
}

func gitInit(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// listen is a loopback TCP listener that accepts and closes, as host:port.
func listen(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l.Addr().String()
}

func portOf(t *testing.T, hostport string) string {
	_, port, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// sshAgentSocket is a unix socket where ssh-agent puts one
// (/tmp/ssh-XXXX/agent.N), listening.
func sshAgentSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "ssh-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "agent.1")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return path
}

// As root, mode = "bwrap" is refused before anything starts (exit 2, the
// fix naming landlock), since ralph drops every capability before it
// starts a process and bwrap cannot make its namespaces without them; auto
// takes landlock and says so.
var _ = suite.Add(e2e.Test{Name: "SandboxBwrapAsRoot", Needs: []e2e.Need{e2e.Tool("bwrap")}, Files: map[string]string{"ralph.toml": sandboxLoop},
	Run: func(t *testing.T, e *e2e.E) {
		if os.Geteuid() != 0 {
			t.Skip("checks ralph as root; not root here")
		}
		out, errOut, code := e.Ralph("run", "--no-tui", "--sandbox", "bwrap").In(e.Dir).Run()
		if code != 2 || !strings.Contains(errOut, "landlock") {
			t.Errorf("--sandbox bwrap as root: exit %d, want 2 with the fix naming landlock\n%s\n%s", code, out, errOut)
		}
		out, errOut, code = e.Ralph("run", "--no-tui", "--sandbox", "auto").In(e.Dir).Run()
		if first, _, _ := strings.Cut(out, "\n"); code != 0 || !strings.Contains(first, "landlock") || strings.Contains(first, "bwrap") {
			t.Errorf("--sandbox auto as root: exit %d, first line %q; want landlock alone\n%s", code, first, errOut)
		}
	}})
