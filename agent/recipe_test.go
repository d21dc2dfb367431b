package agent

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// undocumentedCLIs are the backends docs/agents.md's argv table (rows
// "| `cli` | …") does not list.
func undocumentedCLIs(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../docs/agents.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range Known()[1:] {
		if !regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(name) + "` \\|").Match(doc) {
			out = append(out, name)
		}
	}
	return out
}

// docs/agents.md documents every backend.
func TestEveryCLIIsDocumented(t *testing.T) {
	if u := undocumentedCLIs(t); len(u) > 0 {
		t.Errorf("docs/agents.md's argv table lacks %v", u)
	}
}

// A new CLI is one entry in backends and its backend, nothing else: with
// just those, the names config and a worker's policy accept (Known, CLIs)
// list it, "auto" finds it on PATH, its facts are what pricing, the budget
// check and init read (ReportsCost, ReportsTokens, DefaultModel,
// InitModel, ConfiguredModel, Lookup), init writes its permissions
// (PermissionsFor), a call runs it and its parser reads what it prints,
// and the docs check sees it is undocumented.
func TestACLIIsOneRow(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\ncat >/dev/null\necho 'said: done'\n"
	if err := os.WriteFile(filepath.Join(bin, "test-echo-agent"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := backends
	t.Cleanup(func() { backends = saved })
	backends = append([]func() backend{func() backend {
		return backend{
			Facts: Facts{Name: "test-echo", Auto: true, ReportsTokens: true, DefaultModel: "echo-1", InitModel: "echo-1",
				ExampleModel: "echo-1"},
			bin:       "test-echo-agent",
			argv:      func(path string, o *Options) []string { return append([]string{path}, o.Args...) },
			stdin:     true,
			newParser: func(func() time.Time) parser { return textParser{} },
			permissions: func(test []string, full bool) Permissions {
				return Permissions{Args: []string{"--allow", strings.Join(test, " ")}}
			},
		}
	}}, saved...)

	if !slices.Contains(Known(), "test-echo") || !IsCLI("test-echo") || CLIs()[0] != "test-echo" {
		t.Fatalf("the new CLI is not among the names: Known %v CLIs %v", Known(), CLIs())
	}
	name, path, err := Resolve(Auto, func(b string) (string, error) {
		return existing(filepath.Join(bin, b))
	})
	if err != nil || name != "test-echo" || path != filepath.Join(bin, "test-echo-agent") {
		t.Fatalf("auto resolved %q %q %v", name, path, err)
	}
	f, ok := Lookup("test-echo")
	if !ok || ReportsCost("test-echo") || !ReportsTokens("test-echo") || f.ExampleModel != "echo-1" ||
		DefaultModel("test-echo") != "echo-1" || InitModel("test-echo") != "echo-1" || ConfiguredModel("test-echo", nil) != "echo-1" {
		t.Errorf("its facts: %+v", f)
	}
	if p := PermissionsFor("test-echo", []string{"go", "test"}, false); !slices.Equal(p.Args, []string{"--allow", "go test"}) {
		t.Errorf("init's permissions %v", p.Args)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	res, err := Run(context.Background(), Options{CLI: "test-echo", Prompt: "hi", Dir: t.TempDir()})
	if err != nil || res.Exit != 0 || !strings.Contains(res.Text, "said: done") {
		t.Errorf("a call: %+v %v", res, err)
	}
	if u := undocumentedCLIs(t); !slices.Contains(u, "test-echo") {
		t.Errorf("the docs check does not see the new CLI: %v", u)
	}
}

// existing is a lookPath that finds path when it exists.
func existing(path string) (string, error) {
	_, err := os.Stat(path)
	return path, err
}
