package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// A static plan runs unchanged every iteration, so one that cannot be read
// or that governance refuses is a config error (exit 2) before any run
// starts, not a run that fails every iteration.
var _ = suite.Add(e2e.Test{Name: "BadStaticPlanIsAConfigError", Run: func(t *testing.T, e *e2e.E) {
	for _, tc := range []struct{ name, plan, want string }{
		{"unreadable", `(do (+ 1`, "[plan].rtfs:1:5: '(' opened here is never closed; add ')'"},
		{"refused", `(step \"X\" (call :bank.rob {}))`, "governance refuses the static plan, so every iteration would fail"},
	} {
		e.Run(tc.name, func(t *testing.T, e *e2e.E) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "ralph.toml"), "[plan]\nrtfs = \""+tc.plan+"\"\n[[stop]]\nkind = \"max_iterations\"\nmax = 2\n")
			store := filepath.Join(dir, "store")
			_, errOut, code := e.Ralph("run", filepath.Join(dir, "ralph.toml"), "--store", store).Run()
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
			if tc.name == "unreadable" { // refused before the store is opened
				if _, err := os.Stat(store); err == nil {
					t.Errorf("a store was created for a run that never started")
				}
			}
		})
	}
}})
