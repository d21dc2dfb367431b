package config

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestTasksDecodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "[plan]\nrtfs = '(do)'\n[tasks]\nsource = \"prd:prd.json\"\nparallel = 4\ntarget = \"feature\"\nattempts = 2\nretries = 0\nintegrate = \"merge\"\nclose_issues = true\n"
	c, err := Parse([]byte(src), filepath.Join(dir, "ralph.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := Tasks{Source: "prd:prd.json", Parallel: 4, Target: "feature", Attempts: 2, Integrate: "merge", CloseIssues: true}
	got := *c.Tasks
	got.Retries = nil
	if got != want || c.Tasks.TaskRetries() != 0 {
		t.Fatalf("decoded %+v (retries %d), want %+v and retries 0", *c.Tasks, c.Tasks.TaskRetries(), want)
	}
	if l, col := c.Pos("tasks.integrate"); l != 9 || col != 13 {
		t.Errorf("Pos(tasks.integrate) = %d:%d, want 9:13", l, col)
	}
	if !strings.Contains(c.Snapshot(), "[tasks]") {
		t.Errorf("the snapshot (which resume reads) lacks [tasks]:\n%s", c.Snapshot())
	}
}

func TestTasksDefaults(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("[plan]\nrtfs = '(do)'\n"), filepath.Join(t.TempDir(), "ralph.toml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.Tasks != nil || c.Tasks.TaskRetries() != DefaultTaskRetries {
		t.Fatalf("no [tasks]: %+v, retries %d", c.Tasks, c.Tasks.TaskRetries())
	}
}

func TestTasksBadValues(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ src, want string }{
		{"[tasks]\nparallel = -1\n", "ralph.toml:4:12: tasks.parallel must be at least 1"},
		{"[tasks]\nattempts = -2\n", "ralph.toml:4:12: tasks.attempts must be at least 1"},
		{"[tasks]\nretries = -1\n", "ralph.toml:4:11: tasks.retries must not be negative"},
		{"[tasks]\nparalel = 2\n", "ralph.toml:4: unknown key tasks.paralel; did you mean tasks.parallel?"},
		{"[tasks]\nparallel = \"two\"\n", "ralph.toml:4: tasks.parallel must be"},
	} {
		_, err := Parse([]byte("[plan]\nrtfs = '(do)'\n"+c.src), "ralph.toml", func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.src, err, c.want)
		}
	}
}
