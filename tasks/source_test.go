package tasks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, kind, str string
		want          Spec
	}{
		{"prd:prd.json", "prd", "prd:prd.json", Spec{Path: "prd.json"}},
		{" prd:docs/my prd.json ", "prd", "prd:docs/my prd.json", Spec{Path: "docs/my prd.json"}},
		{"checklist:fix_plan.md", "checklist", "checklist:fix_plan.md", Spec{Path: "fix_plan.md"}},
		{"checklist:TODO.txt", "checklist", "checklist:TODO.txt", Spec{Path: "TODO.txt"}},
		{"prd.json", "prd", "prd:prd.json", Spec{Path: "prd.json"}},
		{"plans/fix_plan.md", "checklist", "checklist:plans/fix_plan.md", Spec{Path: "plans/fix_plan.md"}},
		{"odd:name.json", "prd", "prd:odd:name.json", Spec{Path: "odd:name.json"}},
		{"beads.md", "checklist", "checklist:beads.md", Spec{Path: "beads.md"}},
		{"github:acme/shop?label=ralph", "github", "github:acme/shop?label=ralph", Spec{Owner: "acme", Repo: "shop", Label: "ralph"}},
		{"github:acme/shop.go?label=good%20first%20issue", "github", "github:acme/shop.go?label=good+first+issue", Spec{Owner: "acme", Repo: "shop.go", Label: "good first issue"}},
		{"beads", "beads", "beads", Spec{}},
	}
	for _, tc := range cases {
		got, err := Parse(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got.Kind.Name != tc.kind || got.String() != tc.str {
			t.Errorf("%q: kind %s, String %q; want %s, %q", tc.in, got.Kind.Name, got.String(), tc.kind, tc.str)
		}
		if again, err := Parse(got.String()); err != nil || again != got {
			t.Errorf("%q: String %q does not parse back: %+v, %v", tc.in, got.String(), again, err)
		}
		got.Kind = nil
		if got != tc.want {
			t.Errorf("%q: %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// Refusals name the spec and say how to write it.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                                   "task source is empty: write one of prd:FILE, checklist:FILE, github:OWNER/REPO?label=L, beads, or a path ending in .json",
		"jira:PROJ":                          `task source "jira:PROJ" is not one of prd:FILE, checklist:FILE`,
		"notes.txt":                          `task source "notes.txt" is not one of`,
		"prd":                                `task source "prd": it names no file: write it as NAME:FILE`,
		"prd:":                               `task source "prd:": it names no file`,
		"beads:.beads":                       `task source "beads:.beads": it takes no argument (".beads")`,
		"github":                             `task source "github": it names no repository: write it as github:OWNER/REPO?label=L`,
		"github:acme":                        `task source "github:acme": "acme" is not OWNER/REPO`,
		"github:acme/shop":                   `task source "github:acme/shop": it needs one label`,
		"github:acme/shop?label=":            `it needs one label`,
		"github:acme/shop?label=a&label=b":   `it needs one label`,
		"github:acme/shop?label=a&state=all": `it has "state", which it does not take`,
		"github:acme/sh op?label=a":          `"acme/sh op" is not OWNER/REPO`,
		"github:a/b/c?label=x":               `"a/b/c" is not OWNER/REPO`,
		"github:acme/shop?label=%zz":         `its query "label=%zz" does not parse`,
	} {
		_, err := Parse(in)
		if err == nil || !strings.HasPrefix(err.Error(), want) && !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}

func TestKinds(t *testing.T) {
	t.Parallel()
	names := KindNames()
	if strings.Join(names, " ") != "prd checklist github beads" {
		t.Errorf("KindNames %v", names)
	}
	for _, k := range Kinds() {
		if k.Doc == "" || !strings.HasPrefix(k.Form, k.Name) || k.parse == nil || k.open == nil {
			t.Errorf("row %s is missing a fact: %+v", k.Name, k)
		}
		if k.InRepo && !k.MarksInCheckout {
			t.Errorf("%s: a file of the repository is marked in the merge checkout", k.Name)
		}
	}
	if kindNamed("github").MarksInCheckout || kindNamed("beads").InRepo {
		t.Error("github marks in the checkout, or beads is a file of the repository")
	}
}

// A file source's file must be a file inside the repository.
func TestOpenFileErrors(t *testing.T) {
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	for _, f := range []string{filepath.Join(root, "prd.json"), filepath.Join(outside, "prd.json")} {
		if err := os.WriteFile(f, []byte(`{"userStories": []}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, "dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "prd.json"), filepath.Join(root, "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "prd.json"), filepath.Join(root, "inside.json")); err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string]string{
		"prd:../" + filepath.Base(outside) + "/prd.json": "is not a file inside the repository",
		"prd:" + filepath.Join(outside, "prd.json"):      "is not a file inside the repository",
		"prd:link.json":                          "is not a file inside the repository",
		"prd:.":                                  "is not a file inside the repository",
		"prd:missing.json":                       "missing.json does not exist (paths are relative to the repository's root",
		"prd:dir.json":                           "dir.json is not a regular file",
		"prd:inside.json":                        "",
		"prd:" + filepath.Join(root, "prd.json"): "",
	} {
		sp, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Open(sp, Options{Root: root})
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", spec, err)
		case want == "" && s.File() != "prd.json":
			t.Errorf("%s: File %q, want prd.json", spec, s.File())
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: error %v, want %q", spec, err, want)
		}
	}
	sp, _ := Parse("prd.json")
	if _, err := Open(sp, Options{}); err == nil {
		t.Error("opened a file source without a root")
	}
}

func TestOpenGitHubURL(t *testing.T) {
	t.Parallel()
	sp, _ := Parse("github:acme/shop?label=x")
	for url, want := range map[string]string{
		"ftp://example.com":                   "is not an http(s) URL",
		"https://user:s3cret@ghe.example/api": "carries credentials",
		"https://ghe.example/api/v3/":         "",
		"":                                    "",
	} {
		_, err := Open(sp, Options{GitHubURL: url})
		if (want == "") != (err == nil) || err != nil && (!strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret")) {
			t.Errorf("%q: error %v, want %q", url, err, want)
		}
	}
}
