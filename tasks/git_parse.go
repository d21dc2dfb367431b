package tasks

import (
	"fmt"
	"strconv"
	"strings"
)

// The parsers of what git prints for the queue, each reading the
// NUL-separated form (-z) git documents for scripts: paths come as they
// are, never quoted.

// worktree is one record of `git worktree list --porcelain -z`.
type worktree struct {
	path   string
	head   string
	branch string // a full ref (refs/heads/…); "" when detached or bare
}

// parseWorktrees reads `git worktree list --porcelain -z`: records of
// NUL-terminated "label value" attributes, each record ending with an
// empty attribute; the first attribute of a record is always "worktree".
func parseWorktrees(out string) ([]worktree, error) {
	var all []worktree
	var cur *worktree
	for _, attr := range strings.Split(out, "\x00") {
		if attr == "" {
			cur = nil
			continue
		}
		label, value, _ := strings.Cut(attr, " ")
		if label == "worktree" {
			all = append(all, worktree{path: value})
			cur = &all[len(all)-1]
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("git worktree list: attribute %q before any worktree", attr)
		}
		switch label {
		case "HEAD":
			cur.head = value
		case "branch":
			cur.branch = value
		}
	}
	return all, nil
}

// change is one entry of `git status --porcelain=v1 -z --no-renames`: the
// index's and the work tree's state letters and the path.
type change struct {
	index, work byte
	path        string
}

// describe says in words what the entry is.
func (c change) describe() string {
	switch {
	case c.index == '?':
		return "untracked"
	case c.index == '!':
		return "ignored"
	case c.index == 'D' || c.work == 'D':
		return "deleted"
	case c.index == 'U' || c.work == 'U' || (c.index == 'A' && c.work == 'A'):
		return "unmerged"
	case c.index == 'A':
		return "added"
	}
	return "modified"
}

// parseStatus reads `git status --porcelain=v1 -z --no-renames`: "XY
// PATH" entries, each NUL-terminated (without --no-renames a rename
// would carry its old path as one more field).
func parseStatus(out string) ([]change, error) {
	var all []change
	for _, e := range strings.Split(out, "\x00") {
		if e == "" {
			continue
		}
		if len(e) < 4 || e[2] != ' ' {
			return nil, fmt.Errorf("git status: unexpected entry %q", e)
		}
		all = append(all, change{index: e[0], work: e[1], path: e[3:]})
	}
	return all, nil
}

// mergeResult is what `git merge-tree --write-tree -z --name-only` says
// of a merge: the tree it wrote (with conflict markers in the files that
// conflict), those files, and git's messages about the conflicts.
type mergeResult struct {
	tree      string
	conflicts []string
	messages  []string // "CONFLICT (content): Merge conflict in a.go", …; not "Auto-merging …"
}

// parseMergeTree reads `git merge-tree --write-tree -z --name-only`
// (git-merge-tree(1), OUTPUT): the tree's id and a NUL; for a conflicted
// merge then the conflicted paths, each NUL-terminated, a NUL that begins
// the messages, and the messages as records of a path count, that many
// paths, a conflict type and a message, each NUL-terminated.
func parseMergeTree(out string, conflicted bool) (mergeResult, error) {
	tree, rest, ok := strings.Cut(out, "\x00")
	if !ok || tree == "" || strings.ContainsAny(tree, " \n") {
		return mergeResult{}, fmt.Errorf("git merge-tree: no tree id in its output %q", head(out, 200))
	}
	r := mergeResult{tree: tree}
	if !conflicted {
		return r, nil
	}
	files, msgs, _ := strings.Cut(rest, "\x00\x00")
	seen := map[string]bool{}
	for _, p := range strings.Split(files, "\x00") {
		if p != "" && !seen[p] {
			seen[p] = true
			r.conflicts = append(r.conflicts, p)
		}
	}
	if strings.HasPrefix(rest, "\x00") { // no path listed: the messages begin at once
		msgs = rest[1:]
	}
	f := strings.Split(strings.TrimSuffix(msgs, "\x00"), "\x00")
	for i := 0; i < len(f) && f[i] != ""; {
		n, err := strconv.Atoi(f[i])
		if err != nil || n < 0 || n > len(f) || i+n+2 >= len(f) {
			return mergeResult{}, fmt.Errorf("git merge-tree: malformed message record at %q", head(strings.Join(f[i:], "|"), 200))
		}
		kind, msg := f[i+n+1], strings.TrimSpace(f[i+n+2])
		if kind != "Auto-merging" {
			r.messages = append(r.messages, msg)
		}
		i += n + 3
	}
	return r, nil
}
