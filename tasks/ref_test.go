package tasks

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/testenv"
)

// refIDs are ids as sources give them, and ids built to break ref rules.
var refIDs = []string{
	"US-001", "42", "T001", "shop-a1b", "bd-a1b2.3", "feature_x", "a.b",
	"", " ", "-", ".", "..", "...", "@", "@{", "a@{b", "x.lock", "x.lock.lock", ".hidden", "-dash", "trail.",
	"a..b", "a/b", "a//b", "/", "a:b", "a~1", "a^2", "a?b", "a*b", "a[b", `a\b`, "a b", "tab\there", "nl\nx",
	"del\x7f", "nul\x00", "ünïcödé", "日本", "emoji 🚀", "US 001", "US-001 ", strings.Repeat("long-", 30),
	strings.Repeat("x", 64), strings.Repeat("x", 65), "HEAD", "refs/heads/main", "a.", ".lock", "_", "a-",
}

func TestRefName(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"US-001":    "US-001",
		"42":        "42",
		"bd-a1b2.3": "bd-a1b2.3",
		"a/b":       "a-b-",
		"":          "task-",
		"x.lock":    "x_lock-",
		"..":        "__-",
	} {
		got := RefName(id)
		if !strings.HasPrefix(got, want) || (want[len(want)-1] != '-') != (got == want) {
			t.Errorf("RefName(%q) = %q, want %q (with a hash when it ends in '-')", id, got, want)
		}
	}
	seen := map[string]string{}
	for _, id := range refIDs {
		r := RefName(id)
		if other, dup := seen[r]; dup {
			t.Errorf("RefName(%q) = RefName(%q) = %q", id, other, r)
		}
		seen[r] = id
		if r != RefName(id) {
			t.Errorf("RefName(%q) is not stable", id)
		}
		if len(r) > maxRefLen+9 {
			t.Errorf("RefName(%q) is %d bytes", id, len(r))
		}
		if why := checkBranch("ralph/b/task/" + r); why != "" {
			t.Errorf("RefName(%q) = %q: %s", id, r, why)
		}
	}
}

// git itself takes every RefName as a branch's last part, and agrees with
// checkBranch on what is and is not a branch name. (Not parallel: it sets
// HOME, so that no one's git configuration is read.)
func TestRefNameWithGit(t *testing.T) {
	testenv.Tool(t, "git")
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	ctx, dir := context.Background(), t.TempDir()
	check := func(name string) bool {
		_, err := gitx.Run(ctx, dir, "check-ref-format", "--branch", name)
		return err == nil
	}
	for _, id := range refIDs {
		if name := "ralph/b/task/" + RefName(id); !check(name) {
			t.Errorf("git refuses %q (the id %q)", name, id)
		}
	}
	for _, id := range refIDs {
		if strings.ContainsAny(id, "\x00\n") {
			continue // not a command-line argument git can be given
		}
		name := "ralph/" + id
		if gitOK, ours := check(name), checkBranch(name) == ""; gitOK != ours {
			t.Errorf("%q: git says valid=%v, checkBranch says valid=%v (%s)", name, gitOK, ours, checkBranch(name))
		}
	}
}

func ExampleRefName() {
	for _, id := range []string{"US-001", "T001", "bd-a1b2.3", "fix: the login", "../x"} {
		fmt.Println(RefName(id))
	}
	// Output:
	// US-001
	// T001
	// bd-a1b2.3
	// fix--the-login-cb8e5657
	// __-x-d6b96a97
}
