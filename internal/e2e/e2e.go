package e2e

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/internal/testenv"
)

// RaceEnv set to 1 builds the binary with the race detector (make
// test-race-e2e), so that it sees the shipped binary as well as the tests.
const RaceEnv = "RALPH_E2E_RACE"

// Suite is one package's end-to-end tests and what runs them.
type Suite struct {
	// Package is the main package the binary is built from.
	Package string
	// Args, when set, rewrites the arguments of every ralph command a test
	// runs (the cli tests sign fleet commands in with it).
	Args func(args []string) []string

	tests []Test
	names map[string]bool
	root  string // made by Main: the binary, the process's XDG directories
	bin   string // the binary; "" under -short
	tmux  string // the name of the test process's tmux server (tmux -L)

	browser browser // the test process's Chromium, started by the first E.Page
}

// Test is one end-to-end test.
type Test struct {
	// Name names the test under TestE2E: go test -run 'E2E/Name$'.
	Name string
	// Needs is what the test needs of the machine; the runner checks it
	// before Run.
	Needs []Need
	// Serial tests run one after another, before the parallel ones (a
	// test that takes the machine: several workers, a NATS cluster).
	Serial bool
	// Files are written into E.Dir (paths relative to it) before Run.
	Files map[string]string
	// Run is the test.
	Run func(t *testing.T, e *E)
}

// Add adds tests to the suite, for a package-level
//
//	var _ = suite.Add(e2e.Test{...})
//
// beside the tests of the same command. A test without a name or a Run,
// or with a name already taken, panics.
func (s *Suite) Add(tests ...Test) bool {
	if s.names == nil {
		s.names = map[string]bool{}
	}
	for _, tc := range tests {
		switch {
		case tc.Name == "" || tc.Run == nil:
			panic(fmt.Sprintf("e2e: test %q has no Name or no Run", tc.Name))
		case strings.ContainsAny(tc.Name, " /"):
			panic(fmt.Sprintf("e2e: test name %q has a space or a slash; go test -run could not name it alone", tc.Name))
		case s.names[tc.Name]:
			panic(fmt.Sprintf("e2e: two tests are named %q", tc.Name))
		}
		s.names[tc.Name] = true
		s.tests = append(s.tests, tc)
	}
	return true
}

// Main runs the package's tests (m.Run) and returns the exit code, for the
// package's TestMain: os.Exit(suite.Main(m)). Unless -short, it first
// builds the binary. The package's in-process tests keep their keys and
// witnesses in a directory of the test process's own, never in the real
// home (XDG_CONFIG_HOME and XDG_STATE_HOME are set for the whole process).
func (s *Suite) Main(m *testing.M) int {
	flag.Parse()
	root, err := os.MkdirTemp("", "ralph-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(root)
	s.root = root
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(root, "config"))
	os.Setenv("XDG_STATE_HOME", filepath.Join(root, "state"))
	if !testing.Short() {
		var flags []string
		if os.Getenv(RaceEnv) == "1" {
			flags = append(flags, "-race")
		}
		bin := filepath.Join(root, "bin", "ralph")
		if err := build(bin, s.Package, flags...); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		s.bin = bin
	}
	s.tmux = fmt.Sprintf("ralph-e2e-%d", os.Getpid())
	code := m.Run()
	s.browser.close()
	// A server left by a test whose cleanup did not run (its sessions
	// are killed one by one, and the server exits with the last).
	_ = exec.Command("tmux", "-L", s.tmux, "kill-server").Run()
	return code
}

// Bin is the binary Main built; "" under -short.
func (s *Suite) Bin() string { return s.bin }

// build builds pkg into out.
func build(out, pkg string, flags ...string) error {
	args := append([]string{"build", "-o", out}, flags...)
	cmd := exec.Command("go", append(args, pkg)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// Run runs every test of the suite as a subtest of t, the package's
// TestE2E: the serial ones one after another, then the rest in parallel.
// Under -short it skips: the one place the end-to-end tests skip for
// want of the binary.
func (s *Suite) Run(t *testing.T) {
	if testing.Short() {
		t.Skip("the end-to-end tests build and run the binary; skipped under -short")
	}
	if s.bin == "" {
		t.Fatal("e2e: no binary: the package's TestMain must return suite.Main(m)")
	}
	for _, tc := range s.tests {
		t.Run(tc.Name, func(t *testing.T) {
			e := s.start(t, nil, tc.Needs)
			if !tc.Serial {
				t.Parallel()
			}
			for name, text := range tc.Files {
				path := filepath.Join(e.Dir, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tc.Run(t, e)
		})
	}
}

// start checks the needs a test adds to those of its parent (a
// subtest's) and gives it its E: a directory of its own, and the
// parent's environment or, for a test, one of its own.
func (s *Suite) start(t *testing.T, parent *E, needs []Need) *E {
	t.Helper()
	e := &E{t: t, s: s, needs: map[string]bool{}}
	if parent != nil {
		maps.Copy(e.needs, parent.needs)
		e.Home = parent.Home
	}
	for _, n := range needs {
		n.check(t)
		e.needs[n.name] = true
	}
	e.Dir = t.TempDir()
	if e.Home == "" {
		e.Home = t.TempDir()
	}
	return e
}

// Need is something of the machine a test needs. A test declares it in
// Test.Needs (or E.Run); the runner checks it before the test runs: when
// it is missing the test skips saying so, or fails under RALPH_CI=1
// (internal/testenv).
type Need struct {
	name  string
	check func(t testing.TB)
}

// Tmux is the need of every test that drives a terminal (E.Term).
var Tmux = Tool("tmux")

// Tool is a program on PATH.
func Tool(name string) Need {
	return Need{name, func(t testing.TB) { t.Helper(); testenv.Tool(t, name) }}
}

// File is a file that must exist: a device, a /proc file.
func File(path string) Need {
	return Need{path, func(t testing.TB) { t.Helper(); testenv.File(t, path) }}
}

// Probe is an ability of the machine that only trying shows (mounting a
// tmpfs, making a directory immutable): try does it in an empty directory
// of its own, undoes it, and returns why it could not. It is tried once
// per test process; what describes the ability in the skip.
func Probe(what string, try func(dir string) error) Need {
	var once sync.Once
	var err error
	return Need{what, func(t testing.TB) {
		t.Helper()
		once.Do(func() {
			dir, derr := os.MkdirTemp("", "ralph-e2e-probe-")
			if derr != nil {
				err = derr
				return
			}
			defer os.RemoveAll(dir)
			err = try(dir)
		})
		if err != nil {
			testenv.Need(t, what, err)
		}
	}}
}

// E is what a test drives ralph with: its binary, its own directories and
// environment, its commands and terminals. Its methods fail the test they
// were made for; a subtest gets its own from E.Run.
type E struct {
	t     *testing.T
	s     *Suite
	needs map[string]bool

	// Dir is a directory of the test's own (Test.Files are written here).
	Dir string
	// Home holds the test's XDG directories: config, state and run.
	Home string
}

// Run runs f as a subtest of the test, with an E of its own: a directory
// of its own, and the test's environment (Home). Needs are what the
// subtest alone needs, checked before f runs.
func (e *E) Run(name string, f func(t *testing.T, e *E), needs ...Need) bool {
	e.t.Helper()
	return e.t.Run(name, func(t *testing.T) { f(t, e.s.start(t, e, needs)) })
}

// Bin is the path of the binary.
func (e *E) Bin() string { return e.s.bin }

// Build builds the binary again with flags (-ldflags …) into a directory
// of the test's own and returns its path.
func (e *E) Build(flags ...string) string {
	e.t.Helper()
	bin := filepath.Join(e.t.TempDir(), "ralph")
	if err := build(bin, e.s.Package, flags...); err != nil {
		e.t.Fatal(err)
	}
	return bin
}

// ConfigHome, StateHome and RuntimeDir are the test's XDG directories.
func (e *E) ConfigHome() string { return filepath.Join(e.Home, "config") }

// StateHome is the test's XDG_STATE_HOME.
func (e *E) StateHome() string { return filepath.Join(e.Home, "state") }

// RuntimeDir is the test's XDG_RUNTIME_DIR.
func (e *E) RuntimeDir() string { return filepath.Join(e.Home, "run") }

// dropped are the variables of the test process's environment no command
// of a test sees: its XDG directories are the test's own, and the rest
// would point ralph at the developer's key, store or fleet.
var dropped = map[string]bool{
	"XDG_CONFIG_HOME": true, "XDG_STATE_HOME": true, "XDG_RUNTIME_DIR": true,
	"RALPH_KEY": true, "RALPH_NATS": true, "RALPH_NATS_CREDS": true, "RALPH_STORE": true,
}

// Env is the environment every command of the test runs in unless it
// says otherwise (Cmd.Env): the test process's, without the variables
// that would point ralph at the developer's key, store or fleet, and
// with the XDG directories under Home.
func (e *E) Env() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return dropped[k]
	})
	return append(env, "XDG_CONFIG_HOME="+e.ConfigHome(), "XDG_STATE_HOME="+e.StateHome(), "XDG_RUNTIME_DIR="+e.RuntimeDir())
}

// CleanEnv is an environment with nothing of the test process's but PATH
// and HOME: the test's XDG directories and kv, so that no key from the
// developer's shell leaks into the command.
func (e *E) CleanEnv(kv ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"XDG_CONFIG_HOME=" + e.ConfigHome(), "XDG_STATE_HOME=" + e.StateHome(), "XDG_RUNTIME_DIR=" + e.RuntimeDir()}
	return append(env, kv...)
}

// WaitFile waits until path holds a line and returns what it holds,
// trimmed.
func (e *E) WaitFile(path string) string {
	e.t.Helper()
	var b []byte
	eventually.True(e.t, path+" written", func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil && strings.Contains(string(b), "\n")
	})
	return strings.TrimSpace(string(b))
}
