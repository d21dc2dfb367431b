package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// A config whose RunStarted the ledger would refuse (a goal longer than a
// function_name may be, params nested 2000 deep, a snapshot over the
// bound) is a config error where it is written: exit 2 with the key's
// line, and no store left behind. So is a plan governance refuses after
// the store was opened.
var _ = suite.Add(e2e.Test{Name: "RecordTooLargeIsConfigError", Run: func(t *testing.T, e *e2e.E) {
	const tail = "[plan]\nrtfs = '(step \"A\" 1)'\n[[stop]]\nkind = \"max_iterations\"\nmax = 1\n"
	deep := strings.Repeat("{a = ", 2000) + "1" + strings.Repeat("}", 2000)
	cases := []struct {
		name, toml, want string
	}{
		{"10 MB goal", "[intent]\ngoal = \"" + strings.Repeat("x", 10<<20) + "\"\n" + tail,
			"ralph.toml:2: intent.goal is 10485760 bytes; at most 1024 are allowed, since the chain records it as the run's name: put the details in intent.prompt_file or intent.params"},
		{"2000-deep inline table", "[intent]\ngoal = \"g\"\nparams = { p = " + deep + " }\n" + tail,
			"ralph.toml:3: intent.params.p nests tables or arrays more than 32 deep; flatten it"},
		{"2 MB param", "[intent]\ngoal = \"g\"\n\n[intent.params]\nsmall = 1\nnotes = \"" + strings.Repeat("y", 2<<20) + "\"\n" + tail,
			"ralph.toml:6: the config is * bytes once recorded on the chain, over the 1048576 allowed; intent.params.notes alone is 2097152 bytes: shorten it or move it to a file the plan reads"},
		{"plan governance refuses", "[plan]\nrtfs = '(step \"A\" (call :nope.cap {}))'\n[[stop]]\nkind = \"max_iterations\"\nmax = 1\n",
			"governance refuses the static plan"},
	}
	for _, tc := range cases {
		e.Run(tc.name, func(t *testing.T, e *e2e.E) {
			t.Parallel()
			dir := t.TempDir()
			cfg := filepath.Join(dir, "ralph.toml")
			writeFile(t, cfg, tc.toml)
			_, errOut, code := e.Ralph("run", cfg, "--no-tui").Run()
			// The snapshot's size depends on the temporary paths it holds: * stands for it.
			pre, post, _ := strings.Cut("ralph: "+dir+"/"+tc.want+"\n", "*")
			if tc.name == "plan governance refuses" {
				if code != 2 || !strings.HasPrefix(errOut, "ralph: "+tc.want) {
					t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, errOut, tc.want)
				}
			} else if code != 2 || !strings.HasPrefix(errOut, pre) || !strings.HasSuffix(errOut, post) {
				t.Errorf("exit %d, stderr\n%.300q\nwant exit 2 and\n%q", code, errOut, pre+"*"+post)
			}
			if _, err := os.Stat(filepath.Join(dir, ".ralph")); !os.IsNotExist(err) {
				t.Errorf("a run refused for its config left a store behind (%v)", err)
			}
		})
	}
}})
