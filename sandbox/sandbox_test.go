//go:build linux

package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/internal/procgroup"
	"github.com/ralphloop/ralph/internal/testenv"
)

// tempHome points the user's directories at a temp dir, as every test
// here must.
func tempHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	for _, v := range []string{"HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"} {
		t.Setenv(v, home)
	}
	return home
}

func needMech(t *testing.T, m *mechanism) {
	t.Helper()
	if err := m.probe(NetModel); err != nil {
		testenv.Need(t, m.name, err)
	}
}

func TestParseModeAndNetwork(t *testing.T) {
	for _, m := range []string{"auto", "landlock", "bwrap", "off"} {
		if got, err := ParseMode(m); err != nil || string(got) != m {
			t.Errorf("ParseMode(%q) = %q, %v", m, got, err)
		}
	}
	if _, err := ParseMode("firejail"); err == nil || !strings.Contains(err.Error(), "off, auto, landlock or bwrap") {
		t.Errorf("ParseMode(firejail) = %v; want the modes named", err)
	}
	if n, err := ParseNetwork(""); err != nil || n != NetModel {
		t.Errorf(`ParseNetwork("") = %q, %v; want model`, n, err)
	}
	if _, err := ParseNetwork("some"); err == nil || !strings.Contains(err.Error(), "model, none or all") {
		t.Errorf("ParseNetwork(some) = %v", err)
	}
}

func TestNewOffIsNil(t *testing.T) {
	for _, m := range []Mode{"", Off} {
		s, err := New(Spec{Mode: m}, Bounds{}, nil)
		if s != nil || err != nil {
			t.Errorf("New(%q) = %v, %v; want nil, nil", m, s, err)
		}
		if s.Mechanism() != "off" || s.Hides("/") || s.Close() != nil || s.ProxyAddr() != "" {
			t.Errorf("a nil Sandbox is not off")
		}
	}
}

// TestChooseRefusesWithTheFix: a mode the machine cannot give names why
// for each mechanism and how to fix it; auto never falls back to off.
func TestChooseRefusesWithTheFix(t *testing.T) {
	none := func(Network) error { return errors.New("no bwrap on PATH") }
	for _, row := range modes {
		if row.mechs == nil {
			continue
		}
		fake := modeRow{mode: row.mode, fix: row.fix}
		for _, m := range row.mechs {
			fake.mechs = append(fake.mechs, &mechanism{name: m.name, probe: none})
		}
		m, err := choose(fake, NetModel)
		if m != nil || err == nil {
			t.Fatalf("%s with nothing usable chose %v", row.mode, m)
		}
		for _, want := range []string{string(row.mode), "no bwrap on PATH", `mode = "off"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q lacks %q", row.mode, err, want)
			}
		}
		if row.mode != Landlock && !strings.Contains(err.Error(), "apt install bubblewrap") {
			t.Errorf("%s: %q does not say apt install bubblewrap", row.mode, err)
		}
	}
}

// TestAutoPrefersBwrapWithLandlock: on a machine with both, auto takes
// bwrap for files and pids and Landlock for TCP.
func TestAutoPrefersBwrapWithLandlock(t *testing.T) {
	tempHome(t)
	needMech(t, mechBwrapLandlock)
	s, err := New(Spec{Mode: Auto}, Bounds{Workdir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Mechanism() != "bwrap+landlock" {
		t.Errorf("auto chose %q; want bwrap+landlock", s.Mechanism())
	}
	if s.ProxyAddr() == "" {
		t.Error("network model has no proxy")
	}
}

// TestLandlockCannotHideInsideTheWorkdir: a store inside the workdir
// cannot be hidden by Landlock, so New refuses naming both paths; bwrap
// mounts a tmpfs over it, and Hides says so.
func TestLandlockCannotHideInsideTheWorkdir(t *testing.T) {
	tempHome(t)
	wd := t.TempDir()
	store := filepath.Join(wd, ".ralph")
	mustWrite(t, filepath.Join(store, "KEY"), "secret")
	needMech(t, mechLandlock)
	_, err := New(Spec{Mode: Landlock}, Bounds{Workdir: wd, Hidden: []string{store}}, nil)
	if err == nil || !strings.Contains(err.Error(), store+" must stay hidden but lies inside "+wd) || !strings.Contains(err.Error(), "Landlock") && !strings.Contains(err.Error(), "landlock") {
		t.Fatalf("New(landlock) with the store in the workdir: %v", err)
	}
	needMech(t, mechBwrapLandlock)
	s, err := New(Spec{Mode: Bwrap}, Bounds{Workdir: wd, Hidden: []string{store}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Hides(store) || !s.Hides(filepath.Join(store, "KEY")) || s.Hides(wd) {
		t.Errorf("Hides: store %t, its key %t, workdir %t; want true, true, false", s.Hides(store), s.Hides(filepath.Join(store, "KEY")), s.Hides(wd))
	}
	cmd := exec.CommandContext(t.Context(), "cat", filepath.Join(store, "KEY"))
	out, err := runOut(t, s, cmd)
	if err == nil {
		t.Errorf("cat the hidden store under bwrap printed %q", out)
	}
	if _, err := os.ReadFile(filepath.Join(store, "KEY")); err != nil {
		t.Errorf("the tmpfs over the store reached ralph's view: %v", err)
	}
}

func TestNewChecksPaths(t *testing.T) {
	home := tempHome(t)
	needMech(t, mechLandlock)
	wd := t.TempDir()
	for _, tc := range []struct {
		name string
		spec Spec
		b    Bounds
		want string
	}{
		{"no workdir", Spec{}, Bounds{}, "no workdir"},
		{"a write path that is missing", Spec{Write: []string{filepath.Join(home, "nope")}}, Bounds{Workdir: wd}, "the write path " + filepath.Join(home, "nope") + " does not exist"},
		{"a read path holding ~/.ssh", Spec{Read: []string{home}}, Bounds{Workdir: wd}, filepath.Join(home, ".ssh") + " must stay hidden but lies inside " + home},
		{"a write path holding the store", Spec{Write: []string{home}}, Bounds{Workdir: wd, Hidden: []string{filepath.Join(home, "store")}}, "the write path " + home + " holds " + filepath.Join(home, "store")},
		{"a state dir inside the store", Spec{}, Bounds{Workdir: wd, Hidden: []string{filepath.Join(home, "store")}, StateDirs: []string{filepath.Join(home, "store", "cli")}}, "lies inside " + filepath.Join(home, "store")},
		{"a host with a scheme", Spec{Hosts: []string{"https://api.example.com"}}, Bounds{Workdir: wd}, `hosts = ["api.example.com"]`},
	} {
		tc.spec.Mode = Landlock
		s, err := New(tc.spec, tc.b, nil)
		if err == nil {
			s.Close()
			t.Errorf("%s: New accepted it", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want it to say %q", tc.name, err, tc.want)
		}
	}
}

func runOut(t *testing.T, s *Sandbox, cmd *exec.Cmd) (string, error) {
	t.Helper()
	var out procgroup.CappedBuffer
	out.Limit = 64 << 10
	cmd.Stdout, cmd.Stderr = &out, &out
	_, err := RunContained(With(t.Context(), s), cmd, time.Second, procgroup.StartOptions{})
	return out.String(), err
}

// TestTheEnvironment: a confined process has no agent sockets, its own
// TMPDIR (removed after the call), IS_SANDBOX, the run's caches and the
// proxy, with no host exempt from it.
func TestTheEnvironment(t *testing.T) {
	home := tempHome(t)
	needMech(t, mechLandlock)
	t.Setenv("SSH_AUTH_SOCK", "/run/agent.sock")
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/bus")
	t.Setenv("GPG_AGENT_INFO", "/run/gpg")
	t.Setenv("NO_PROXY", "*")
	cache := filepath.Join(home, "cache")
	s, err := New(Spec{Mode: Landlock}, Bounds{Workdir: t.TempDir(), CacheRoot: cache}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := runOut(t, s, exec.CommandContext(t.Context(), "sh", "-c", `env; touch "$TMPDIR/x" && echo TMPOK`))
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	env := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	for _, gone := range []string{"SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "GPG_AGENT_INFO"} {
		if v, ok := env[gone]; ok {
			t.Errorf("%s=%s reached the confined process", gone, v)
		}
	}
	proxy := "http://" + s.ProxyAddr()
	want := map[string]string{"IS_SANDBOX": "1", "GOCACHE": filepath.Join(cache, "go-build"), "GOMODCACHE": filepath.Join(cache, "go-mod"),
		"npm_config_cache": filepath.Join(cache, "npm"), "HTTPS_PROXY": proxy, "http_proxy": proxy, "ALL_PROXY": proxy, "NO_PROXY": "", "no_proxy": ""}
	for k, v := range want {
		if got, ok := env[k]; !ok || got != v {
			t.Errorf("%s = %q (set %t); want %q", k, got, ok, v)
		}
	}
	tmp := env["TMPDIR"]
	if !strings.HasPrefix(tmp, s.tmpRoot+"/call-") || !strings.Contains(out, "TMPOK") {
		t.Errorf("TMPDIR %q is not a writable call dir under %s", tmp, s.tmpRoot)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the call's TMPDIR outlived it: %v", err)
	}
}

// TestACacheInAWritePathIsKept: a GOCACHE the user set inside [sandbox]
// write is the confined process's; one outside every write path (the
// user's shared cache) is replaced by the run's own, as is GOMODCACHE.
func TestACacheInAWritePathIsKept(t *testing.T) {
	home := tempHome(t)
	needMech(t, mechLandlock)
	shared := filepath.Join(home, "shared")
	mustWrite(t, filepath.Join(shared, "go-build", "README"), "x")
	t.Setenv("GOCACHE", filepath.Join(shared, "go-build"))
	t.Setenv("GOMODCACHE", filepath.Join(home, "elsewhere", "mod"))
	cache := filepath.Join(home, "cache")
	s, err := New(Spec{Mode: Landlock, Write: []string{shared}}, Bounds{Workdir: t.TempDir(), CacheRoot: cache}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := runOut(t, s, exec.CommandContext(t.Context(), "sh", "-c", `echo "$GOCACHE|$GOMODCACHE" && touch "$GOCACHE/x"`))
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := filepath.Join(shared, "go-build") + "|" + filepath.Join(cache, "go-mod"); strings.TrimSpace(out) != want {
		t.Errorf("the caches are %q, want %q", strings.TrimSpace(out), want)
	}
}

// TestConfinementStaysInTheChild: the thread Landlock restricted forks
// and exits; ralph's own threads keep reading what the children cannot,
// and none of them carries no_new_privs once the calls are done.
func TestConfinementStaysInTheChild(t *testing.T) {
	home := tempHome(t)
	needMech(t, mechLandlock)
	secret := filepath.Join(home, "secret")
	mustWrite(t, secret, "s")
	s, err := New(Spec{Mode: Landlock}, Bounds{Workdir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 10 {
		if out, err := runOut(t, s, exec.CommandContext(t.Context(), "cat", secret)); err == nil {
			t.Fatalf("call %d read the secret: %q", i, out)
		}
		p, err := Start(With(t.Context(), s), exec.Command("cat", secret), procgroup.StartOptions{ParentDeath: true})
		if err != nil {
			t.Fatal(err)
		}
		if p.Wait() == nil {
			t.Fatalf("start %d read the secret", i)
		}
	}
	done := make(chan error, 32)
	for range cap(done) {
		go func() { _, err := os.ReadFile(secret); done <- err }()
	}
	for range cap(done) {
		if err := <-done; err != nil {
			t.Fatalf("ralph lost its own access: %v", err)
		}
	}
	eventually.True(t, "no thread of ralph with no_new_privs", func() bool { return restrictedThreads(t) == 0 })
}

// restrictedThreads counts this process's threads with no_new_privs set
// (each restricted thread sets it before its Landlock domain).
func restrictedThreads(t *testing.T) int {
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), "NoNewPrivs:\t1") {
			n++
		}
	}
	return n
}

// TestTheViewIsTheAllowList: bwrap binds the allowed trees one by one
// (never /), each once, parents first; a sibling of the workdir is not
// among them.
func TestTheViewIsTheAllowList(t *testing.T) {
	home := tempHome(t)
	needMech(t, mechLandlock)
	wd := filepath.Join(home, "src", "project")
	mustWrite(t, filepath.Join(wd, "go.mod"), "module x")
	mustWrite(t, filepath.Join(home, "src", "other", "go.mod"), "module y")
	s, err := New(Spec{Mode: Landlock}, Bounds{Workdir: wd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	args := strings.Join(bwrapView(s.view), " ")
	for _, bad := range []string{"--bind / /", "--ro-bind / /", filepath.Join(home, "src") + " ", filepath.Join(home, "src", "other")} {
		if strings.Contains(args+" ", bad) {
			t.Errorf("bwrap's binds %q hold %q", args, bad)
		}
	}
	if !strings.Contains(args, "--bind "+wd+" "+wd) {
		t.Errorf("bwrap's binds %q lack the workdir", args)
	}
	seen := map[string]bool{}
	for _, r := range s.view.sorted() {
		if seen[r.path] {
			t.Errorf("%s is bound twice", r.path)
		}
		seen[r.path] = true
	}
}

// TestAProgramInAHiddenPathIsRefused: a command whose program lies in a
// hidden path is refused with the path, not run with it made visible.
func TestAProgramInAHiddenPathIsRefused(t *testing.T) {
	home := tempHome(t)
	needMech(t, mechLandlock)
	prog := filepath.Join(home, ".ssh", "tool")
	mustWrite(t, prog, "#!/bin/sh\ncat ~/.ssh/id_ed25519\n")
	if err := os.Chmod(prog, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := New(Spec{Mode: Landlock}, Bounds{Workdir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := runOut(t, s, exec.CommandContext(t.Context(), prog))
	if err == nil || !strings.Contains(err.Error(), "the program "+prog+" lies inside "+filepath.Join(home, ".ssh")) {
		t.Errorf("running %s: %v (%s)", prog, err, out)
	}
}

// TestAnNpmInstalledProgramSeesItsTree: a CLI npm installed, run through
// a chain of links (a test's PATH entry -> bin/cli-1 -> the package's
// script), finds each link, its package's other files and its
// dependencies in the node_modules tree; what lies beside that tree
// stays out of the view.
func TestAnNpmInstalledProgramSeesItsTree(t *testing.T) {
	home := tempHome(t)
	prefix := filepath.Join(home, "tools")
	pkg := filepath.Join(prefix, "node_modules", "@scope", "cli")
	mustWrite(t, filepath.Join(pkg, "bin", "cli.sh"), "#!/bin/sh\nd=$(dirname \"$(readlink -f \"$0\")\")\ncat \"$d/../lib/own.txt\" \"$d/../../../dep/dep.txt\"\ncat "+filepath.Join(prefix, "secret.txt")+" 2>/dev/null && echo LEAK\nexit 0\n")
	if err := os.Chmod(filepath.Join(pkg, "bin", "cli.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(pkg, "lib", "own.txt"), "own\n")
	mustWrite(t, filepath.Join(prefix, "node_modules", "dep", "dep.txt"), "dep\n")
	mustWrite(t, filepath.Join(prefix, "secret.txt"), "secret\n")
	if err := os.MkdirAll(filepath.Join(prefix, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../node_modules/@scope/cli/bin/cli.sh", filepath.Join(prefix, "bin", "cli-1")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(home, "path", "cli")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(prefix, "bin", "cli-1"), link); err != nil {
		t.Fatal(err)
	}
	for _, col := range attackColumns[1:] {
		t.Run(col.name, func(t *testing.T) {
			needMech(t, col.mech)
			s, err := newWith(Spec{Mode: Auto, Network: NetModel}, Bounds{Workdir: t.TempDir()}, nil, col.mech)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			out, err := runOut(t, s, exec.CommandContext(t.Context(), link))
			if err != nil || out != "own\ndep\n" {
				t.Errorf("%s ran with %v and printed %q, want its own file and its dependency's, and not the secret beside its tree", link, err, out)
			}
		})
	}
}

// TestStateDirs: a missing state directory is made; an existing state
// file (Claude's ~/.claude.json) is allowed as it is, and writable.
func TestStateDirs(t *testing.T) {
	home := tempHome(t)
	needMech(t, mechLandlock)
	dir := filepath.Join(home, ".fakecli")
	file := filepath.Join(home, ".fakecli.json")
	mustWrite(t, file, "{}")
	s, err := New(Spec{Mode: Landlock}, Bounds{Workdir: t.TempDir(), StateDirs: []string{dir, file}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("the state directory was not made: %v", err)
	}
	script := `echo x > "$1/state" && echo '{"a":1}' > "$2"`
	if out, err := runOut(t, s, exec.CommandContext(t.Context(), "sh", "-c", script, "sh", dir, file)); err != nil {
		t.Fatalf("writing the state: %v: %s", err, out)
	}
	if b, _ := os.ReadFile(file); string(b) != "{\"a\":1}\n" {
		t.Errorf("the state file holds %q", b)
	}
}

// TestAMissingStateFileIsMadeAFile: a state file of the CLI's that does
// not exist yet (a first run's ~/.claude.json) is made holding its
// document, not as a directory, and the confined process can replace its
// contents.
func TestAMissingStateFileIsMadeAFile(t *testing.T) {
	home := tempHome(t)
	needMech(t, mechLandlock)
	file := filepath.Join(home, ".fakecli.json")
	s, err := New(Spec{Mode: Landlock}, Bounds{Workdir: t.TempDir(), StateDirs: []string{file},
		StateFiles: map[string]string{file: "{}\n"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if b, err := os.ReadFile(file); err != nil || string(b) != "{}\n" {
		t.Fatalf("the state file holds %q (%v), want {}", b, err)
	}
	if out, err := runOut(t, s, exec.CommandContext(t.Context(), "sh", "-c", `echo '{"a":1}' > "$1"`, "sh", file)); err != nil {
		t.Fatalf("writing the state file: %v: %s", err, out)
	}
	if b, _ := os.ReadFile(file); string(b) != "{\"a\":1}\n" {
		t.Errorf("the state file holds %q", b)
	}
}

// TestSortedKeepsWhatATreeDoesNotHold: a symlink inside a bound tree is
// already there (bwrap could not make it again over a read-only mount),
// its target outside is bound; a read-only path inside a read-write tree
// stays a rule of its own.
func TestSortedKeepsWhatATreeDoesNotHold(t *testing.T) {
	v := view{rules: []rule{
		{path: "/run/systemd/resolve/stub-resolv.conf", access: readExec},
		{path: "/etc/resolv.conf", access: readExec, link: "../run/systemd/resolve/stub-resolv.conf"},
		{path: "/etc", access: readExec},
		{path: "/bin", access: readExec, link: "usr/bin"},
		{path: "/usr/bin", access: readExec},
		{path: "/usr", access: readExec},
		{path: "/w", access: readWrite},
		{path: "/w/ro", access: readExec},
	}}
	var got []string
	for _, r := range v.sorted() {
		got = append(got, r.path)
	}
	want := "/bin /etc /run/systemd/resolve/stub-resolv.conf /usr /w /w/ro"
	if strings.Join(got, " ") != want {
		t.Errorf("sorted = %v; want %s", got, want)
	}
}
