package builtin

import (
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
)

// Every row is whole: a spec with an id, a description, input and output
// schemas and an example, and a handler.
func TestEveryCapabilityIsAWholeRow(t *testing.T) {
	rowsMu.RLock()
	defer rowsMu.RUnlock()
	for _, r := range rows {
		s := r.spec
		if s.ID == "" || s.Description == "" || s.Input == nil || s.Output == nil || len(s.Examples) == 0 || s.Risk == "" || r.handler == nil {
			t.Errorf("capability %q: its row lacks an id, a description, a schema, an example, a risk or a handler", s.ID)
		}
	}
}

// Reports lists every metadata key a call records.
func TestReportsListWhatCallsRecord(t *testing.T) {
	t.Parallel()
	r, dir := newRegistry(t, "true")
	os.WriteFile(dir+"/a.txt", []byte("a"), 0o600)
	calls := map[string][]string{"ccos.echo": {`{:message "hi"}`}, "ccos.math.add": {"1", "2"}, "shell.exec": {`{:cmd "true"}`},
		"fs.read": {`{:path "a.txt"}`}, "fs.write": {`{:path "b.txt" :content "b"}`}, "fs.list": {`{:path "."}`},
		"kv.put": {`{:key "k" :value 1}`}, "kv.get": {`{:key "k"}`}}
	for id, args := range calls {
		res, err := invoke(t, r, id, args...)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		undeclared(t, id, res.Metadata)
	}
	full := agent.Result{CLI: "claude", Model: "m", Stopped: agent.StoppedTimeout, TextCut: 3, Containment: "cgroup",
		Retries: []agent.Retry{{Status: 429, Attempt: 1, Max: 2}},
		Output:  agent.Output{Path: "o.out", Bytes: 1, SHA256: "x", Err: os.ErrClosed}, ErrOutput: agent.Output{Path: "o.err", Err: os.ErrClosed},
		Limit: &agent.Limit{Kind: agent.LimitUsage, Reset: time.Unix(1, 0)}}
	meta := agentResult(full).Metadata
	meta["denied"] = "Edit a.go" // a call refused a tool adds it
	undeclared(t, "agent.run", meta)
}

func undeclared(t *testing.T, id string, meta map[string]string) {
	t.Helper()
	s, _ := Lookup(id)
	for k := range meta {
		if !slices.Contains(s.Reports, k) {
			t.Errorf("a call of %s records metadata %q, which its spec's Reports does not list", id, k)
		}
	}
}

// undocumented are the built-in capabilities that no id or glob of the
// README's list of capabilities ("- capabilities (`ccos.echo`, …)") covers.
func undocumented(t testing.TB) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile("(?m)^- capabilities \\(.*\\)").Find(readme)
	if line == nil {
		t.Fatal("README.md has no line listing the capabilities (\"- capabilities (`ccos.echo`, …)\")")
	}
	var globs []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllSubmatch(line, -1) {
		globs = append(globs, string(m[1]))
	}
	var out []string
	for _, s := range Specs() {
		if !slices.ContainsFunc(globs, func(g string) bool { ok, _ := path.Match(g, s.ID); return ok }) {
			out = append(out, s.ID)
		}
	}
	return out
}

// The README lists every built-in capability.
func TestEveryCapabilityIsDocumented(t *testing.T) {
	if u := undocumented(t); len(u) > 0 {
		t.Errorf("README.md's list of capabilities lacks %s", strings.Join(u, ", "))
	}
}
