package conformance

// The harness every CLI's conformance test shares: the ralph binary built
// once, the installed CLIs, an isolated environment (tests never touch the
// real home), and a Go module whose test fails until Add is fixed.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	// ralphBin is the binary TestMain builds; empty when the build failed.
	ralphBin string
	// agentsBin is the directory holding claude, codex, gemini, opencode
	// and the node they run on ($RALPH_AGENTS_BIN); empty: tests skip.
	agentsBin string
	// goEnv is GOCACHE, GOMODCACHE and GOPATH of the go that runs the
	// tests, so the projects' `go test` does not rebuild the standard
	// library in each test's empty home.
	goEnv []string
)

func TestMain(m *testing.M) {
	agentsBin = os.Getenv("RALPH_AGENTS_BIN")
	if agentsBin == "" {
		fmt.Println("conformance: RALPH_AGENTS_BIN is not set, so the real agent CLIs are not run; `make test-agents` installs them and sets it")
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "ralph-conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ralphBin = filepath.Join(dir, "ralph")
	if real, err := filepath.EvalSymlinks(dir); err == nil { // as /proc/PID/exe names it (checkProxied)
		ralphBin = filepath.Join(real, "ralph")
	}
	build := exec.Command("go", "build", "-o", ralphBin, "github.com/ralphloop/ralph")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "conformance: building ralph:", err)
		os.Exit(1)
	}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", k).Output()
		if err == nil {
			goEnv = append(goEnv, k+"="+strings.TrimSpace(string(out)))
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// needCLI skips the test when the real CLIs are not installed, and returns
// the path of cli ("claude", "codex", "gemini", "opencode").
func needCLI(t *testing.T, cli string) string {
	t.Helper()
	if agentsBin == "" {
		t.Skip("RALPH_AGENTS_BIN is not set; run make test-agents")
	}
	p := filepath.Join(agentsBin, cli)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed in RALPH_AGENTS_BIN %s: %v", cli, agentsBin, err)
	}
	return p
}

// versions are the versions of cli that agents/install.sh installed
// (it links each as bin/CLI-VERSION), oldest first; none when the CLIs are
// not installed.
func versions(cli string) []string {
	links, _ := filepath.Glob(filepath.Join(agentsBin, cli+"-*"))
	var vs []string
	for _, l := range links {
		v := strings.TrimPrefix(filepath.Base(l), cli+"-")
		if v != "" && v[0] >= '0' && v[0] <= '9' {
			vs = append(vs, v)
		}
	}
	slices.SortFunc(vs, compareVersions)
	return vs
}

// compareVersions orders dotted versions by their numbers ("2.1.197" <
// "2.1.332").
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, _ := strconv.Atoi(as[i]) // a part that is no number counts as 0
		y, _ := strconv.Atoi(bs[i])
		if x != y {
			return x - y
		}
	}
	return len(as) - len(bs)
}

// newest is the newest installed version of cli, the one bin/CLI runs.
func newest(cli string) string {
	vs := versions(cli)
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// eachVersion runs f as a parallel subtest, named by the version, for
// every installed version of cli (agents/package.json pins the newest and
// the previous ones), so that each conformance test holds for all of them.
func eachVersion(t *testing.T, cli string, f func(t *testing.T, v string)) {
	t.Helper()
	needCLI(t, cli)
	vs := versions(cli)
	if len(vs) == 0 {
		t.Fatalf("no %s-VERSION in RALPH_AGENTS_BIN %s: agents/install.sh links each pinned version so", cli, agentsBin)
	}
	for _, v := range vs {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			f(t, v)
		})
	}
}

// newestOnly is eachVersion for the newest version alone: the tests of
// what ralph does around any CLI (containment, floods, a big prompt, the
// bypass flag) run on the newest, so that make test-agents stays within
// its time on two cores; those of what the CLI prints run on every pin.
func newestOnly(t *testing.T, cli string, f func(t *testing.T, v string)) {
	t.Helper()
	needCLI(t, cli)
	v := newest(cli)
	if v == "" {
		t.Fatalf("no %s-VERSION in RALPH_AGENTS_BIN %s: agents/install.sh links each pinned version so", cli, agentsBin)
	}
	t.Run(v, func(t *testing.T) { f(t, v) })
}

// cliAt is the path of version v of cli.
func cliAt(t *testing.T, cli, v string) string {
	t.Helper()
	p := filepath.Join(agentsBin, cli+"-"+v)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s %s is not installed in RALPH_AGENTS_BIN: %v", cli, v, err)
	}
	return p
}

// pathWith is a PATH entry ("PATH=…") on which cli is version v: a
// directory of the test's own holding only that link comes first. Put last
// in an environment, it wins (as in exec.Cmd, the last value of a name is
// the one used, and ralph looks the CLI up the same way).
func pathWith(t *testing.T, cli, v string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(cliAt(t, cli, v), filepath.Join(dir, cli)); err != nil {
		t.Fatal(err)
	}
	return "PATH=" + dir + ":" + basePath()
}

// basePath is the PATH env gives: the installed CLIs, go, the system.
func basePath() string {
	goBin := filepath.Dir(must(exec.LookPath("go")))
	return strings.Join([]string{agentsBin, goBin, "/usr/local/bin", "/usr/bin", "/bin"}, ":")
}

// env is an environment for ralph and the CLI it runs: a home, config,
// state, cache and runtime directory of the test's own, the installed CLIs
// and go first on PATH, and extra ("NAME=value") last, so it wins.
func env(t *testing.T, extra ...string) []string {
	t.Helper()
	home := t.TempDir()
	e := []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_RUNTIME_DIR=" + mkdir(t, filepath.Join(home, "run")),
		"PATH=" + basePath(),
		"LANG=C.UTF-8",
		"TERM=dumb",
		"NO_COLOR=1",
		"CI=true",
	}
	e = append(e, goEnv...)
	return append(e, extra...)
}

// goProject writes a Go module whose one test fails until Add adds, and
// commits it in a fresh git repository; it returns the directory.
func goProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":       "module calc\n\ngo 1.22\n",
		"calc.go":      "package calc\n\n// Add returns the sum of a and b.\nfunc Add(a, b int) int {\n\treturn a - b\n}\n",
		"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 3); got != 5 {\n\t\tt.Fatalf(\"Add(2, 3) = %d, want 5\", got)\n\t}\n}\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=ralph test", "-c", "user.email=test@ralph.invalid", "commit", "-q", "-m", "calc"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// result is what one ralph command did.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s\n--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// ralph runs the built binary in dir with env, bounded by limit (a hung
// run is killed and fails the test).
func ralph(t *testing.T, dir string, env []string, limit time.Duration, args ...string) result {
	t.Helper()
	if ralphBin == "" {
		t.Skip("ralph was not built")
	}
	before := connCounts(t)
	cmd := exec.Command(ralphBin, args...)
	cmd.Dir, cmd.Env = dir, env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("ralph %v ran past %s:\n%s", args, limit, result{out.String(), errOut.String(), -1})
	}
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	r := result{out.String(), errOut.String(), code}
	if code == 0 && len(args) > 0 && args[0] == "init" {
		shareGoCache(t, dir, env)
	}
	if len(args) > 0 && args[0] == "run" && sandboxed(dir) {
		checkSandboxedRun(t, r, before)
	}
	return r
}

// shareGoCache lets the sandbox `ralph init` wrote in dir keep the Go
// build cache the tests' go uses (env's GOCACHE, as [sandbox] write), so
// that each project's `go test` does not build the standard library
// again in a cache of its own: the one change the tests make to that
// sandbox.
func shareGoCache(t *testing.T, dir string, env []string) {
	t.Helper()
	cache := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GOCACHE="); ok {
			cache = v
		}
	}
	if cache == "" {
		return
	}
	path := filepath.Join(dir, "ralph.toml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "\n# write = []", fmt.Sprintf("\nwrite = [%q]", cache), 1)
	if text == string(b) {
		t.Fatalf("%s has no \"# write = []\" in [sandbox] to give the Go build cache:\n%s", path, b)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sandboxed says whether dir's ralph.toml confines the run: the [sandbox]
// `ralph init` writes (mode = "auto"), unless the test turned it off.
func sandboxed(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "ralph.toml"))
	return err == nil && sandboxSection.Match(b) && !bytes.Contains(b, []byte("\nmode = \"off\""))
}

var sandboxSection = regexp.MustCompile(`(?m)^\[sandbox\]`)

// checkSandboxedRun holds a run under the sandbox to what it promises: its
// first line names the mechanism that confined it, and the mock model was
// reached only through the sandbox's proxy since before (checkProxied),
// at least once by a run that ended done (its agent worked).
func checkSandboxedRun(t *testing.T, r result, before []int) {
	t.Helper()
	first, _, _ := strings.Cut(r.stdout, "\n")
	mech := ""
	if _, after, ok := strings.Cut(first, " · sandbox: "); ok {
		mech, _, _ = strings.Cut(after, " ")
	} else {
		t.Errorf("the run's first line does not name its sandbox: %q", first)
	}
	n := checkProxied(t, before)
	if r.code == 0 && n == 0 {
		t.Errorf("the run under the sandbox (%s) ended done, but the mock model saw no connection from ralph's proxy", mech)
	}
	t.Logf("sandbox %s: the mock model took %d connections, all from ralph's proxy", mech, n)
}

// storeOf is the store of the run in dir that printed r: where the
// sandbox moved it out of the workdir (the run's first line says), else
// the config's .ralph.
func storeOf(t *testing.T, dir string, r result) string {
	t.Helper()
	first, _, _ := strings.Cut(r.stdout, "\n")
	if _, after, ok := strings.Cut(first, " · store: "); ok {
		if store, _, ok := strings.Cut(after, " (moved out of the workdir"); ok {
			return store
		}
	}
	return filepath.Join(dir, ".ralph")
}

// unsandbox turns off the sandbox `ralph init` wrote (mode = "auto"), for
// a test whose point is the CLI without ralph's sandbox (its own sandbox,
// or ralph's containment alone).
func unsandbox(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "ralph.toml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "\nmode = \"auto\"", "\nmode = \"off\"", 1)
	if text == string(b) {
		t.Fatalf("%s has no mode = \"auto\" to turn off:\n%s", path, b)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, p string) string {
	t.Helper()
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// verifyChain runs `ralph chain verify` on the run in dir; it must pass.
func verifyChain(t *testing.T, dir string, e []string) {
	t.Helper()
	if r := ralph(t, dir, e, time.Minute, "chain", "verify"); r.code != 0 {
		t.Errorf("ralph chain verify: %s", r)
	}
}

// survivors polls, for 10 s at most, until none of pids is alive (a zombie
// is dead), and returns those still alive then, each killed (so a failed
// test leaves nothing running) with its command line.
func survivors(pids []int) map[int]string {
	left := map[int]string{}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		clear(left)
		for _, pid := range pids {
			if processAlive(pid) {
				left[pid] = processCmdline(pid)
			}
		}
		if len(left) == 0 || time.Now().After(end) {
			break
		}
	}
	for pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return left
}

// processAlive: pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func processCmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// writeTranscript writes what a CLI printed to agent/testdata/real/NAME
// with ext (its standard output) and NAME.stderr (its standard error, only
// when there was any).
func writeTranscript(t *testing.T, name, ext, stdout, stderr string) {
	t.Helper()
	base := filepath.Join("..", "testdata", "real", name)
	if err := os.WriteFile(base+ext, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(base + ".stderr")
	if stderr != "" {
		if err := os.WriteFile(base+".stderr", []byte(stderr), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: %d bytes of output, %d of standard error", base, len(stdout), len(stderr))
}
