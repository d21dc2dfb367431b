package tasks

import (
	"slices"
	"strings"
	"testing"
)

// Outputs of git 2.39.5, recorded from real runs.
const (
	// git merge-tree --write-tree -z --name-only main l, where l renamed
	// f.txt to g.txt that main deleted, and both changed "sp ace.txt".
	mergeTreeRenameDelete = "716a3683a4af08c77388ac70a53b70bb006659f1\x00g.txt\x00sp ace.txt\x00\x00" +
		"2\x00g.txt\x00f.txt\x00CONFLICT (rename/delete)\x00CONFLICT (rename/delete): f.txt renamed to g.txt in l, but deleted in main.\n\x00" +
		"1\x00sp ace.txt\x00Auto-merging\x00Auto-merging sp ace.txt\n\x00" +
		"1\x00sp ace.txt\x00CONFLICT (contents)\x00CONFLICT (content): Merge conflict in sp ace.txt\n\x00"
	mergeTreeClean = "5c4c1c40c8d46a77ced09fe7fa8f3dea37e3809a\x00"
	// git worktree list --porcelain -z of a repository and one linked
	// work tree, detached.
	worktreeList = "worktree /tmp/gt/m\x00HEAD 0000000000000000000000000000000000000000\x00branch refs/heads/main\x00\x00" +
		"worktree /tmp/gt/wt 1\x00HEAD c0ff439e367dda97c447dc92547760ae952f7cf0\x00detached\x00locked\x00\x00"
	// git status --porcelain=v1 -z --no-renames -uall
	statusOut = "A  f.txt\x00A  sp ace.txt\x00 M calc.go\x00?? new\x00!! run.log\x00UU both.go\x00"
)

func TestParseMergeTree(t *testing.T) {
	r, err := parseMergeTree(mergeTreeRenameDelete, true)
	if err != nil {
		t.Fatal(err)
	}
	if r.tree != "716a3683a4af08c77388ac70a53b70bb006659f1" || !slices.Equal(r.conflicts, []string{"g.txt", "sp ace.txt"}) {
		t.Fatalf("parsed %+v", r)
	}
	want := []string{"CONFLICT (rename/delete): f.txt renamed to g.txt in l, but deleted in main.", "CONFLICT (content): Merge conflict in sp ace.txt"}
	if !slices.Equal(r.messages, want) {
		t.Fatalf("messages %q, want %q", r.messages, want)
	}
	if r, err := parseMergeTree(mergeTreeClean, false); err != nil || r.tree != "5c4c1c40c8d46a77ced09fe7fa8f3dea37e3809a" || r.conflicts != nil {
		t.Fatalf("clean: %+v, %v", r, err)
	}
	for _, bad := range []string{"", "no tree here", "abc\x00p\x00\x00x\x00", "abc\x00p\x00\x00" + "9\x00a\x00b\x00"} {
		if _, err := parseMergeTree(bad, true); err == nil {
			t.Errorf("parseMergeTree(%q) took it", bad)
		}
	}
}

func TestParseWorktrees(t *testing.T) {
	wts, err := parseWorktrees(worktreeList)
	if err != nil {
		t.Fatal(err)
	}
	want := []worktree{{path: "/tmp/gt/m", head: strings.Repeat("0", 40), branch: "refs/heads/main"},
		{path: "/tmp/gt/wt 1", head: "c0ff439e367dda97c447dc92547760ae952f7cf0"}}
	if !slices.Equal(wts, want) {
		t.Fatalf("parsed %+v, want %+v", wts, want)
	}
	if _, err := parseWorktrees("HEAD abc\x00"); err == nil {
		t.Fatal("an attribute before any worktree was taken")
	}
}

func TestParseStatus(t *testing.T) {
	changes, err := parseStatus(statusOut)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, c.path+" "+c.describe())
	}
	want := []string{"f.txt added", "sp ace.txt added", "calc.go modified", "new untracked", "run.log ignored", "both.go unmerged"}
	if !slices.Equal(got, want) {
		t.Fatalf("parsed %q, want %q", got, want)
	}
	if _, err := parseStatus("M\x00"); err == nil {
		t.Fatal("a short entry was taken")
	}
}

func TestBounds(t *testing.T) {
	s := "one\ntwo\nthree\nfour\n"
	if got := tail(s, 11); got != "[… 8 bytes before this left out]\nthree\nfour\n" {
		t.Errorf("tail = %q", got)
	}
	if got := head(s, 10); got != "one\ntwo\n[… 11 bytes after this left out]\n" {
		t.Errorf("head = %q", got)
	}
	if tail(s, 100) != s || head(s, 100) != s {
		t.Error("a text that fits was cut")
	}
	if got := oneLine(" a\nb\tc\x7f "); got != "a b c" {
		t.Errorf("oneLine = %q", got)
	}
}

// The parsers never panic, and what they return holds together.
func FuzzParseMergeTree(f *testing.F) {
	for _, s := range []string{mergeTreeRenameDelete, mergeTreeClean, "", "\x00", "t\x00\x00", "t\x00\x002\x00a\x00", "t\x00\x00-1\x00x\x00y\x00"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, out string, conflicted bool) {
		r, err := parseMergeTree(out, conflicted)
		if err != nil {
			return
		}
		if r.tree == "" || (!conflicted && (r.conflicts != nil || r.messages != nil)) {
			t.Fatalf("parseMergeTree(%q, %v) = %+v", out, conflicted, r)
		}
		for _, p := range r.conflicts {
			if p == "" || strings.Contains(p, "\x00") {
				t.Fatalf("path %q", p)
			}
		}
	})
}

func FuzzParseWorktrees(f *testing.F) {
	for _, s := range []string{worktreeList, "", "worktree \x00", "branch x\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		wts, err := parseWorktrees(out)
		if err == nil && strings.Count(out, "worktree") < len(wts) {
			t.Fatalf("parseWorktrees(%q) = %d work trees", out, len(wts))
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	for _, s := range []string{statusOut, "", "?? \x00", "XY"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		changes, err := parseStatus(out)
		for _, c := range changes {
			if err == nil && (c.path == "" || c.describe() == "") {
				t.Fatalf("parseStatus(%q): %+v", out, c)
			}
		}
	})
}
