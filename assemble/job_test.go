package assemble_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/assemble"
)

// tree is a job's tree of the files it lists (slash paths), none local.
type tree map[string]bool // path → is a directory

func (t tree) Stat(rel string) (bool, bool) {
	d, ok := t[rel]
	return ok || rel == ".", d || rel == "."
}
func (tree) Local(string) string       { return "" }
func (tree) Describe() string          { return "the test's tree" }
func (tree) Missing(rel string) string { return fmt.Sprintf("the test's tree has no %s", rel) }

// A submitted job's paths are checked in its tree, and its static plan is
// admitted by governance, each refusal a config error naming the key.
func TestCheckJob(t *testing.T) {
	t.Parallel()
	const prompt = "[intent]\ngoal = \"g\"\nprompt_file = \"PROMPT.md\"\n[plan]\nrtfs = '(call :ccos.echo {:message \"hi\"})'\n"
	for _, tc := range []struct {
		name, src string
		tree      tree
		want      string
	}{
		{"a file the tree has", prompt, tree{"PROMPT.md": false}, ""},
		{"a file missing from the tree", prompt, tree{}, "intent.prompt_file PROMPT.md is not in the run's workspace: the test's tree has no PROMPT.md"},
		{"a directory for a file", prompt, tree{"PROMPT.md": true}, "intent.prompt_file PROMPT.md is a directory in the test's tree, not a file"},
		{"a plan governance refuses", "[plan]\nrtfs = '(call :fs.delete {:path \"x\"})'\n[governance]\ndeny = [\"fs.*\"]\n", tree{}, "fs.delete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := assemble.CheckJob(context.Background(), load(t, tc.src), "ralph.toml", tc.tree, assemble.InMemory)
			var ce *assemble.ConfigError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v (%T), want a *ConfigError with %q", err, err, tc.want)
			}
		})
	}
}
