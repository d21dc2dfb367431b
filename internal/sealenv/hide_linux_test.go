package sealenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/ralphloop/ralph/internal/testenv"
)

// helperEnv makes the test binary the helper that drops its capabilities
// (TestDropCapabilitiesHelper): a test cannot drop them from its own
// process, which would keep none for the tests after it.
const helperEnv = "SEALENV_DROP_HELPER"

// TestDropCapabilitiesOnEveryThread: as root, after dropCapabilities no
// thread of the process keeps a bounding, ambient or inheritable
// capability, each keeps its effective ones, and a command started from
// any thread runs with no capability at all. Before, only the thread
// that dropped them changed, and a command another thread started kept
// CAP_SYS_PTRACE (and read ralph's memory). It runs in this binary (with
// cgo under -race: libpsx) and in one built without cgo
// (syscall.AllThreadsSyscall).
func TestDropCapabilitiesOnEveryThread(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		testenv.Need(t, "root", "ralph drops the capabilities of its threads only as root (CI runs as root)")
	}
	t.Run("this-binary", func(t *testing.T) {
		t.Parallel()
		runHelper(t, os.Args[0])
	})
	t.Run("without-cgo", func(t *testing.T) {
		t.Parallel()
		goBin := testenv.Tool(t, "go")
		bin := filepath.Join(t.TempDir(), "sealenv.test")
		build := exec.Command(goBin, "test", "-c", "-o", bin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build the test binary without cgo: %v\n%s", err, out)
		}
		runHelper(t, bin)
	})
}

func runHelper(t *testing.T, bin string) {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^TestDropCapabilitiesHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestDropCapabilitiesHelper") {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
}

// TestDropCapabilitiesHelper is the helper process of
// TestDropCapabilitiesOnEveryThread.
func TestDropCapabilitiesHelper(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("the helper process of TestDropCapabilitiesOnEveryThread")
	}
	before := capLines(t, "/proc/self/status")
	// Threads of their own, parked, so the process has several besides
	// the one that drops.
	const parked = 8
	var ready, release sync.WaitGroup
	ready.Add(parked)
	release.Add(1)
	for range parked {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ready.Done()
			release.Wait()
		}()
	}
	ready.Wait()
	if err := dropCapabilities(); err != nil {
		t.Fatal(err)
	}
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(tasks) < parked+1 {
		t.Fatalf("%d threads (%v)", len(tasks), err)
	}
	for _, task := range tasks {
		c := capLines(t, task)
		for _, set := range []string{"CapBnd", "CapAmb", "CapInh"} {
			if c[set] != "0000000000000000" {
				t.Errorf("%s: %s %s, want none", task, set, c[set])
			}
		}
		if c["CapEff"] != before["CapEff"] {
			t.Errorf("%s: CapEff %s, want the %s it had", task, c["CapEff"], before["CapEff"])
		}
	}
	release.Done()
	// Commands started from many threads (each start may run on another).
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			out, err := exec.Command("grep", "^Cap", "/proc/self/status").Output()
			if err != nil {
				t.Errorf("command %d: %v", i, err)
				return
			}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if !strings.HasSuffix(line, "0000000000000000") {
					t.Errorf("command %d runs with %s", i, line)
				}
			}
		})
	}
	wg.Wait()
}

// capLines reads the Cap* lines of a /proc status file: "CapBnd" → its
// hex mask.
func capLines(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if name, v, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(name, "Cap") {
			c[name] = strings.TrimSpace(v)
		}
	}
	if len(c) != 5 {
		t.Fatalf("%s has %d Cap lines: %v", path, len(c), c)
	}
	return c
}
