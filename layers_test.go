package main

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/ralphloop/ralph/"

// layers is DESIGN §1's dependency rule: the packages of ours each package
// may import (its non-test files; "internal/" stands for every package
// under internal/). A package not listed here fails the test until it is
// given its place.
var layers = map[string][]string{
	"rtfs":                {},
	"bench":               {},
	"internal/procgroup":  {},
	"internal/proctest":   {"internal/eventually"},
	"internal/eventually": {},
	"internal/testenv":    {},
	"internal/sealenv":    {},
	"internal/detach":     {"internal/"},
	"internal/usage":      {},
	"internal/e2e":        {"internal/"},
	"internal/mockmodel":  {},
	"sandbox":             {"internal/"},
	"internal/gitx":       {"internal/"},
	"agent":               {"sandbox", "internal/"},
	"agent/conformance":   {},
	"config":              {"agent"},
	"ledger":              {"rtfs"},
	"capability":          {"rtfs"},
	"capability/builtin":  {"rtfs", "capability", "agent", "ledger", "sandbox", "internal/"},
	"governance":          {"rtfs", "capability"},
	"arbiter":             {"rtfs", "capability", "governance", "config", "agent", "sandbox", "internal/"},
	"arbiter/oaitest":     {},
	"stop":                {"rtfs", "ledger", "config", "sandbox", "internal/"},
	"mcpserver":           {"ledger", "loop", "stop", "internal/"},
	"loop":                {"rtfs", "ledger", "capability", "capability/builtin", "governance", "arbiter", "stop", "config", "agent", "sandbox", "internal/"},
	"notify":              {"rtfs", "ledger", "stop", "loop", "config", "sandbox", "internal/"},
	"serve":               {"ledger", "stop", "loop", "agent", "sandbox", "internal/"},
	"tui":                 {"rtfs", "ledger", "stop", "loop", "config", "agent", "internal/"},
	"fleet":               {"rtfs", "ledger", "stop", "loop", "serve", "notify", "config", "agent", "sandbox", "internal/"},
	"fleet/fleettest":     {"fleet"},
	"assemble":            {"rtfs", "ledger", "capability", "capability/builtin", "governance", "arbiter", "stop", "loop", "notify", "config", "agent", "sandbox", "internal/"},
	"runsource":           {"ledger", "loop", "stop", "serve", "fleet", "mcpserver", "internal/"},
	"web":                 {"rtfs", "ledger", "stop", "loop", "serve", "fleet", "mcpserver", "runsource", "assemble", "config", "internal/"},
	"tasks":               {"internal/"},
	"tasks/batch":         {"tasks", "assemble", "loop", "ledger", "config", "stop", "agent", "sandbox", "rtfs", "internal/"},
	"tasks/fleetrun":      {"tasks", "tasks/batch", "fleet", "loop", "stop", "config", "internal/"},
	"cli":                 {"*"},
	"":                    {"cli"},
}

// TestLayers holds every package's imports of ours to layers.
func TestLayers(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "examples" || name == "docs") {
			return filepath.SkipDir
		}
		p, err := build.ImportDir(path, 0)
		if _, ok := err.(*build.NoGoError); ok {
			return nil
		}
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(path)
		if pkg == "." {
			pkg = ""
		}
		allowed, ok := layers[pkg]
		if !ok {
			t.Errorf("package %q has no place in layers (layers_test.go): add it with the packages it may import, as DESIGN §1 reads", pkg)
			return nil
		}
		for _, imp := range p.Imports {
			ours, ok := strings.CutPrefix(imp, module)
			if !ok || slices.Contains(allowed, "*") || slices.Contains(allowed, ours) {
				continue
			}
			if strings.HasPrefix(ours, "internal/") && slices.Contains(allowed, "internal/") {
				continue
			}
			t.Errorf("%s imports %s, which DESIGN §1 puts above it (layers_test.go lets it import %v)", module+pkg, imp, allowed)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
