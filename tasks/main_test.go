package tasks

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestMain gives the package's tests one home of their own, set before
// any test runs so that they can run in parallel: no configuration of the
// machine's is read (GIT_CONFIG_NOSYSTEM, HOME, XDG_*), and git knows no
// identity (user.useConfigOnly), so ralph supplies its own. A test that
// needs another home sets it (t.Setenv) and does not run in parallel.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "ralph-tasks-home")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for name, val := range map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, ".config"),
		"XDG_STATE_HOME": filepath.Join(home, ".state"), "XDG_RUNTIME_DIR": filepath.Join(home, ".run"), "GIT_CONFIG_NOSYSTEM": "1"} {
		os.Setenv(name, val)
	}
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tuseConfigOnly = true\n[init]\n\tdefaultBranch = main\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}
