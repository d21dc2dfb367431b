package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Under RALPH_CI=1 a missing tool fails the test; without it, it skips.
// Each case runs this test binary as a child that calls Tool on a program
// that does not exist, and reads how the child's test ended.
func TestMissingSkipsOrFailsUnderCI(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		Tool(t, "ralph-testenv-no-such-tool")
		t.Fatal("Tool returned for a program that is not on PATH")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ci, want string
		fails    bool
	}{{"", "--- SKIP", false}, {"0", "--- SKIP", false}, {"1", "--- FAIL", true}} {
		cmd := exec.Command(exe, "-test.run", "^TestMissingSkipsOrFailsUnderCI$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", CIEnv+"="+tc.ci)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.fails || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "needs ralph-testenv-no-such-tool") {
			t.Errorf("RALPH_CI=%q: %v, want %s naming the tool:\n%s", tc.ci, err, tc.want, out)
		}
	}
}

// What is there is found: Tool returns its path and File lets the test go on.
func TestPresentGoesOn(t *testing.T) {
	t.Parallel()
	if p := Tool(t, "go"); p == "" {
		t.Error("Tool(go) returned no path")
	}
	File(t, os.Args[0])
}
