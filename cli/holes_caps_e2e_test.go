package cli_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// asRoot is the need of a test of what ralph does as root only.
var asRoot = e2e.Probe("root (ralph drops its children's capabilities only as root; CI runs as root)", func(string) error {
	if os.Geteuid() != 0 {
		return errors.New("this test runs as a user who is not root")
	}
	return nil
})

// peekRalph, run by shell.exec as ralph's child ($PPID), tries to read
// ralph: its environ, its memory (every readable mapping /proc/PID/maps
// lists, and Go's heap at 0xc000000000, where it starts whether or not
// maps can be read), and writes what it got, with its own capabilities
// and environment, to peek.N (N counts the calls); of the memory it
// keeps only the strings that look like the test's key (mem-keys.N). The
// last call says "ready" and waits, so the test can read ralph itself
// while it runs.
const peekRalph = `p=$PPID
n=$(($(cat n 2>/dev/null || echo 0) + 1)); echo $n > n
{
	echo "pid $p"
	grep '^Cap' /proc/self/status
	if cat /proc/$p/environ > environ.$n 2>/dev/null; then echo "environ read"; else echo "environ refused"; fi
	: > mem.$n
	while read -r range perms rest; do
		case $perms in r*) ;; *) continue ;; esac
		s=$((0x${range%-*})); e=$((0x${range#*-}))
		dd if=/proc/$p/mem iflag=skip_bytes,count_bytes skip=$s count=$((e - s)) 2>/dev/null >> mem.$n
	done < /proc/$p/maps 2>/dev/null
	dd if=/proc/$p/mem iflag=skip_bytes,count_bytes skip=$((0xc000000000)) count=$((64 << 20)) 2>/dev/null >> mem.$n
	echo "mem bytes $(wc -c < mem.$n)"
	grep -a -o 'llm-key-[0-9a-f]*' mem.$n > mem-keys.$n; rm mem.$n
	env > env.$n
} > peek.$n
if [ "$n" = "$1" ]; then echo ready > ready; sleep 5; fi
`

// HolesRootChildCannotReadRalph (issue 37): as root, every command ralph
// starts runs without capabilities, from whichever of ralph's threads
// forked it, so it cannot read ralph's memory or environ, where the
// model's key is (api_key_env with a name that does not look like a
// secret stays in ralph's initial environment). Before, only the thread
// that dropped them changed, and a shell.exec child read the key 8 times
// in 8. Eight iterations start eight children; while the last one waits,
// the test (root with its capabilities) reads ralph's environ itself and
// finds the key: it was there to be read.
var _ = suite.Add(e2e.Test{Name: "HolesRootChildCannotReadRalph", Needs: []e2e.Need{asRoot, e2e.Tool("dd")},
	Run: func(t *testing.T, e *e2e.E) {
		const key, runs = "llm-key-4b1f9e2a7c3d", 8
		dir := e.Dir
		writeFile(t, filepath.Join(dir, "peek.sh"), peekRalph)
		writeFile(t, filepath.Join(dir, "ralph.toml"), fmt.Sprintf(`[model]
provider = "static"
api_key_env = "LLMCRED"
[plan]
rtfs = '''(step "Peek" (call :shell.exec {:cmd "sh" :args ["peek.sh" "%d"]}))'''
[[stop]]
kind = "max_iterations"
max = %d
[governance]
shell_allow = ["sh"]
`, runs, runs))
		cmd := e.Ralph("run", "ralph.toml", "--no-tui", "--store", filepath.Join(t.TempDir(), "store")).In(dir).
			Env(e.CleanEnv("HOME="+t.TempDir(), "LLMCRED="+key)).Start()
		e.WaitFile(filepath.Join(dir, "ready"))
		environ, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Pid()) + "/environ")
		if err != nil || !strings.Contains(string(environ), key) {
			t.Errorf("ralph's environ, read by the test as root with its capabilities, lacks the key (%v): the test proves nothing", err)
		}
		out := cmd.Rest()
		if err := cmd.Wait(); exitCode(err) != 3 {
			t.Fatalf("run: %v\n%s\n%s", err, out, cmd.Stderr())
		}
		for n := 1; n <= runs; n++ {
			checkPeek(t, dir, n, cmd.Pid(), key)
		}
	}})

// checkPeek judges what the nth child could read of ralph (pid).
func checkPeek(t *testing.T, dir string, n, pid int, key string) {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s.%d", name, n)))
		if err != nil {
			t.Fatalf("child %d: %v", n, err)
		}
		return string(b)
	}
	peek := read("peek")
	if !strings.Contains(peek, fmt.Sprintf("pid %d\n", pid)) {
		t.Fatalf("child %d's parent is not ralph (pid %d):\n%s", n, pid, peek)
	}
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		if !strings.Contains(peek, set+":\t0000000000000000\n") {
			t.Errorf("child %d runs with capabilities:\n%s", n, peek)
			break
		}
	}
	if !strings.Contains(peek, "environ refused\n") || !strings.Contains(peek, "mem bytes 0\n") {
		t.Errorf("child %d read ralph's environ or memory:\n%s", n, peek)
	}
	for _, name := range []string{"environ", "mem-keys", "env"} {
		if strings.Contains(read(name), key) {
			t.Errorf("child %d found the model's key in %s.%d", n, name, n)
		}
	}
}
