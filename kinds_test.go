package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/capability/builtin"
	"github.com/ralphloop/ralph/notify"
	"github.com/ralphloop/ralph/stop"
	"github.com/ralphloop/ralph/tasks"
)

// kindRow is one extension point whose kinds are named (DESIGN §21): the
// package that owns the names, the only one whose code may compare one;
// the names, from the owner's own table; and which expressions hold such
// a name, so that a name several extension points share ("command": a
// sink, a stop kind, an agent CLI, a provider) is checked only where it
// stands for this one (nil: wherever it appears).
type kindRow struct {
	what  string
	owner string // a package as layers names it
	names func() []string
	holds func(x ast.Expr) bool
}

// kindRows are the extension points held to their owners. Another one is
// a row more.
var kindRows = []kindRow{
	{what: "stop kind", owner: "stop", names: stop.KindNames, holds: kindField},
	{what: "notify sink", owner: "notify", names: notify.SinkNames, holds: kindField},
	{what: "agent CLI", owner: "agent", names: agentNames, holds: notProvider},
	{what: "capability", owner: "capability/builtin", names: builtinIDs},
	{what: "capability", owner: "arbiter", names: func() []string { return []string{arbiter.LLMAskID} }},
	{what: "task source", owner: "tasks", names: tasks.KindNames},
}

// notProvider holds anything but a model provider's name (x.Provider,
// provider): "command" is a provider too, which is not an agent CLI.
func notProvider(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.SelectorExpr:
		return x.Sel.Name != "Provider"
	case *ast.Ident:
		return x.Name != "provider"
	}
	return true
}

// agentNames are the agent backends' names (not agent.Auto, a way to
// choose one).
func agentNames() []string {
	return slices.DeleteFunc(agent.Known(), func(n string) bool { return n == agent.Auto })
}

func builtinIDs() []string {
	var ids []string
	for _, s := range builtin.Specs() {
		ids = append(ids, s.ID)
	}
	return ids
}

// kindField holds a kind's name: x.Kind, or a variable named kind.
func kindField(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.SelectorExpr:
		return x.Sel.Name == "Kind"
	case *ast.Ident:
		return x.Name == "kind"
	}
	return false
}

// TestKindsAreComparedOnlyByTheirOwners fails on a comparison (==, !=, a
// switch case) of a kind's name, written as a literal or as its owner's
// constant, in any non-test file of a package but the kind's owner: code
// outside the owner asks the kind's row. Owners may use their own names.
func TestKindsAreComparedOnlyByTheirOwners(t *testing.T) {
	c := newKindCheck(t, kindRows)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "examples" || name == "docs") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		return c.file(path)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range c.found {
		t.Error(f)
	}
}

// The check finds what it is for, and leaves the rest.
func TestTheKindCheckFindsComparisons(t *testing.T) {
	rows := []kindRow{
		{what: "notify sink", owner: "notify", names: func() []string { return []string{"webhook", "command"} }, holds: kindField},
		{what: "capability", owner: "capability/builtin", names: func() []string { return []string{"agent.run"} }},
	}
	cases := []struct {
		name, pkg, src string
		found          int
	}{
		{"a literal compared", "cli", `if n.Kind == "webhook" {}`, 1},
		{"a literal on the left, !=", "fleet", `if "webhook" != s.cfg.Kind {}`, 1},
		{"a switch case", "cli", `switch n.Kind { case "terminal", "webhook": }`, 1},
		{"a tagless switch", "cli", `switch { case kind == "command": }`, 1},
		{"a capability id anywhere", "tui", `if a.FunctionName == "agent.run" {}`, 1},
		{"the owner's constant", "cli", `if n.Kind == notify.KindWebhook {}`, 1},
		{"a shared name that stands for another point", "assemble", `if cfg.Model.Provider == "command" {}`, 0},
		{"the owner itself", "notify", `if n.Kind == "webhook" {}`, 0},
		{"a name that is no kind's", "cli", `if n.Kind == "pager" {}`, 0},
		{"a name not compared", "cli", `n := config.Notify{Kind: "webhook"}; _ = n`, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newKindCheck(t, rows)
			c.consts["notify"] = map[string]string{"KindWebhook": "webhook"}
			src := "package x\nimport \"github.com/ralphloop/ralph/notify\"\nfunc f() {\n" + tc.src + "\n}\n"
			if err := c.source(tc.pkg, tc.pkg+"/x.go", src); err != nil {
				t.Fatal(err)
			}
			if len(c.found) != tc.found {
				t.Errorf("found %q, want %d", c.found, tc.found)
			}
		})
	}
}

// kindCheck walks files for comparisons of kinds' names.
type kindCheck struct {
	rows   []kindRow
	names  map[string][]int             // a name → the rows that list it
	consts map[string]map[string]string // an owner → its constants that hold a name → the name
	found  []string
}

func newKindCheck(t *testing.T, rows []kindRow) *kindCheck {
	t.Helper()
	c := &kindCheck{rows: rows, names: map[string][]int{}, consts: map[string]map[string]string{}}
	for i, r := range rows {
		for _, n := range r.names() {
			c.names[n] = append(c.names[n], i)
		}
		if _, ok := c.consts[r.owner]; !ok {
			consts, err := ownerConsts(r.owner)
			if err != nil {
				t.Fatal(err)
			}
			c.consts[r.owner] = consts
		}
	}
	return c
}

// ownerConsts are the string constants the non-test files of package dir
// declare, by name.
func ownerConsts(dir string) (map[string]string, error) {
	out := map[string]string{}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				for i, name := range v.Names {
					if i < len(v.Values) {
						if s, ok := stringLit(v.Values[i]); ok {
							out[name.Name] = s
						}
					}
				}
			}
		}
	}
	return out, nil
}

func (c *kindCheck) file(path string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return c.source(filepath.ToSlash(filepath.Dir(path)), path, string(src))
}

// source checks one file of package pkg.
func (c *kindCheck) source(pkg, path, src string) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		return err
	}
	if pkg == "." {
		pkg = ""
	}
	imports := map[string]string{} // the name a file gives an owner → the owner
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		owner, ok := strings.CutPrefix(p, module)
		if !ok {
			continue
		}
		name := owner[strings.LastIndex(owner, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		imports[name] = owner
	}
	compare := func(at token.Pos, subject, name ast.Expr) {
		if msg := c.compared(pkg, imports, subject, name); msg != "" {
			c.found = append(c.found, fmt.Sprintf("%s: %s", fset.Position(at), msg))
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				compare(n.Pos(), n.X, n.Y)
				compare(n.Pos(), n.Y, n.X)
			}
		case *ast.SwitchStmt:
			if n.Tag == nil {
				return true
			}
			for _, cc := range n.Body.List {
				for _, e := range cc.(*ast.CaseClause).List {
					compare(e.Pos(), n.Tag, e)
				}
			}
		}
		return true
	})
	return nil
}

// compared says what is wrong with comparing subject to name in package
// pkg, or "": name is a kind's name (a literal, or its owner's constant),
// pkg owns no kind of that name, and subject holds that kind's names.
func (c *kindCheck) compared(pkg string, imports map[string]string, subject, name ast.Expr) string {
	lit, ok := stringLit(name)
	if !ok {
		sel, isSel := name.(*ast.SelectorExpr)
		if !isSel {
			return ""
		}
		x, isIdent := sel.X.(*ast.Ident)
		if !isIdent || imports[x.Name] == "" {
			return ""
		}
		if lit, ok = c.consts[imports[x.Name]][sel.Sel.Name]; !ok {
			return ""
		}
	}
	rows := c.names[lit]
	if slices.ContainsFunc(rows, func(i int) bool { return c.rows[i].owner == pkg }) {
		return ""
	}
	for _, i := range rows {
		if r := c.rows[i]; r.holds == nil || r.holds(subject) {
			return fmt.Sprintf("compares %s %q outside %s, its owner; ask its row there instead", r.what, lit, r.owner)
		}
	}
	return ""
}

// stringLit is the value of a string literal.
func stringLit(x ast.Expr) (string, bool) {
	b, ok := x.(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(b.Value)
	return s, err == nil
}
