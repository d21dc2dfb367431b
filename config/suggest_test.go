package config

import (
	"strings"
	"testing"
)

// An unknown key names the nearest known key, with its file and line.
func TestUnknownKeySuggestsNearest(t *testing.T) {
	t.Parallel()
	head := "[intent]\ngoal = \"g\"\n[model]\nprovider = \"static\"\n[plan]\nrtfs = \"(do)\"\n"
	for _, c := range []struct{ name, toml, want string }{
		{"typo in a table", head + "[loop]\nworkdr = \".\"\n", "ralph.toml:8: unknown key loop.workdr; did you mean loop.workdir?"},
		{"misspelt table", head + "[stpo]\n", "ralph.toml:7: unknown key stpo; did you mean stop?"},
		{"in an array of tables", head + "[[stop]]\nkind = \"max_iterations\"\nmaxx = 3\n", "ralph.toml:9: unknown key stop.maxx; did you mean stop.max?"},
		{"key of another table", head + "prompt_file = \"P.md\"\n", "ralph.toml:7: unknown key plan.prompt_file; did you mean intent.prompt_file?"},
		{"nothing near", head + "[loop]\nfrobnicate = 1\n", "ralph.toml:8: unknown key loop.frobnicate; check the spelling against the commented ralph.toml"},
	} {
		_, err := Parse([]byte(c.toml), "ralph.toml", func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"max", "maxx", 1}, {"workdr", "workdir", 1}, {"kitten", "sitting", 3}, {"abc", "", 3}, {"stpo", "stop", 1}} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
