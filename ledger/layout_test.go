package ledger

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// docKeys returns the key column of docs/ledger.md §2's table.
func docKeys(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/ledger.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## 2. Keys in Badger\n")
	if !ok {
		t.Fatal("docs/ledger.md has no section \"## 2. Keys in Badger\"")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var keys []string
	for line := range strings.Lines(sec) {
		cells := strings.Split(strings.TrimSpace(line), " | ")
		if !strings.HasPrefix(line, "| ") || len(cells) < 2 || cells[0] == "| key" {
			continue
		}
		keys = append(keys, strings.TrimPrefix(cells[0], "| "))
	}
	return keys
}

// isKeyConst reports whether a constant of layout.go names a key or a
// prefix (prefix…, key…, KV…), as opposed to a length.
func isKeyConst(name string) bool {
	return strings.HasPrefix(name, "prefix") || strings.HasPrefix(name, "key") || strings.HasPrefix(name, "KV")
}

// The doc's table of keys and layoutKeys list the same keys, each written
// with the constant it names, and every key constant of layout.go is in
// layoutKeys: a key added to one place and not the others fails here.
func TestLayoutMatchesDoc(t *testing.T) {
	t.Parallel()
	var code []string
	for _, k := range layoutKeys {
		code = append(code, k.doc)
		if !strings.HasPrefix(k.doc, "`"+k.prefix+"`") {
			t.Errorf("layoutKeys: %q does not begin with its constant %q", k.doc, k.prefix)
		}
	}
	doc := docKeys(t)
	for _, k := range doc {
		if !slices.Contains(code, k) {
			t.Errorf("docs/ledger.md §2 lists %s, which ledger/layout.go's layoutKeys does not", k)
		}
	}
	for _, k := range code {
		if !slices.Contains(doc, k) {
			t.Errorf("ledger/layout.go's layoutKeys lists %s, which docs/ledger.md §2 does not", k)
		}
	}

	f, err := parser.ParseFile(token.NewFileSet(), "layout.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts, listed []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					if d.Tok == token.CONST {
						for _, n := range s.Names {
							if isKeyConst(n.Name) {
								consts = append(consts, n.Name)
							}
						}
					}
					if len(s.Names) == 1 && s.Names[0].Name == "layoutKeys" {
						ast.Inspect(s.Values[0], func(n ast.Node) bool {
							if id, ok := n.(*ast.Ident); ok {
								listed = append(listed, id.Name)
							}
							return true
						})
					}
				}
			}
		}
	}
	if len(consts) == 0 || len(listed) == 0 {
		t.Fatalf("layout.go: found constants %v and layoutKeys naming %v", consts, listed)
	}
	for _, c := range consts {
		if !slices.Contains(listed, c) {
			t.Errorf("layout.go declares %s, which layoutKeys (and so docs/ledger.md §2) leaves out", c)
		}
	}
}

func TestLayoutParsersInvertBuilders(t *testing.T) {
	t.Parallel()
	for _, seq := range []uint64{0, 1, 255, 1 << 40, ^uint64(0)} {
		if got, ok := parseActionKey(actionKey(seq)); !ok || got != seq {
			t.Errorf("parseActionKey(actionKey(%d)) = %d, %v", seq, got, ok)
		}
		if got, ok := parseCheckpointKey(checkpointKey(seq)); !ok || got != seq {
			t.Errorf("parseCheckpointKey(checkpointKey(%d)) = %d, %v", seq, got, ok)
		}
		if got := indexKeySeq(indexKey(IndexPlanID, "p/1", seq)); got != seq {
			t.Errorf("indexKeySeq(indexKey(…, %d)) = %d", seq, got)
		}
	}
	if level, index, ok := parseTreeKey(treeKey(7, 1<<33)); !ok || level != 7 || index != 1<<33 {
		t.Errorf("parseTreeKey(treeKey(7, 2^33)) = %d, %d, %v", level, index, ok)
	}
	for _, bad := range [][]byte{[]byte(prefixAction), append(actionKey(3), 0), []byte("a/short")} {
		if _, ok := parseActionKey(bad); ok {
			t.Errorf("parseActionKey(%q) accepted a malformed key", bad)
		}
	}
	if _, _, ok := parseTreeKey(append(treeKey(4, 1), 0)); ok {
		t.Error("parseTreeKey accepted a key one byte too long")
	}
	if got := kvKeyOf(kvKey(UserKVKey("a/b"))); got != "user/a/b" {
		t.Errorf("kvKeyOf(kvKey(user key)) = %q", got)
	}
	if got := IdemKVKey("global", "", "pay"); got != "idem/global//pay" {
		t.Errorf("IdemKVKey(global, \"\", pay) = %q", got)
	}
	if got := RunKVKey("r1"); got != "run/r1" {
		t.Errorf("RunKVKey(r1) = %q", got)
	}
}
