package builtin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/internal/procgroup"
	"github.com/ralphloop/ralph/internal/proctest"
)

// A shell.exec whose command started a process in a new session (out of
// its process group) kills that process too at its timeout, and says which
// mechanism contained it.
func TestShellTimeoutKillsANewSession(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, "sh")
	f := filepath.Join(t.TempDir(), "pid")
	script := fmt.Sprintf(`setsid /bin/sh -c 'echo $$ > %[1]s.tmp && mv %[1]s.tmp %[1]s && exec sleep 300' & `+
		`while [ ! -s %[1]s ]; do sleep 0.01; done; cat %[1]s; wait`, f)
	res, err := invoke(t, r, "shell.exec", fmt.Sprintf(`{:cmd "sh" :args ["-c" %q] :timeout-ms 1000}`, script))
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("got %v, want a timeout", err)
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(res.Value.AsMap().GetKey("stdout").Str()))
	if perr != nil {
		t.Fatalf("the child's pid: %v", perr)
	}
	proctest.WaitGone(t, pid)
	if got, want := res.Metadata["containment"], procgroup.DefaultContainment(procgroup.StartOptions{}); got != want {
		t.Errorf("containment %q, want %q", got, want)
	}
}

// A tool use whose result never came is recorded as failed and
// cancelled, with why, when the call was stopped or failed; when the call
// ended well it stays "none reported".
func TestToolUseThatNeverReturned(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		res     agent.Result
		success bool
		why     string
	}{
		{agent.Result{Stopped: agent.StoppedTimeout, Exit: -1}, false, "timeout"},
		{agent.Result{Stopped: agent.StoppedIdleTimeout, Exit: -1}, false, "idle timeout"},
		{agent.Result{Stopped: agent.StoppedCancelled, Exit: -1}, false, "cancelled"},
		{agent.Result{Exit: 2}, false, "exited with status 2"},
		{agent.Result{Exit: -1}, false, "killed by a signal"},
		{agent.Result{Exit: 0}, true, ""},
	} {
		rec := &recorder{}
		l := &toolLog{rep: rec, ctx: context.Background(), cli: "claude", pending: map[string]pendingTool{}}
		l.event(agent.Event{Kind: agent.EventToolUse, ToolID: "t1", Tool: "Bash", Input: `{"command":"sleep 300"}`})
		l.event(agent.Event{Kind: agent.EventToolUse, ToolID: "t2", Tool: "Read", Input: `{}`})
		l.event(agent.Event{Kind: agent.EventToolResult, ToolID: "t2", Text: "read"})
		l.flush(tc.res)
		if len(rec.children) != 2 {
			t.Fatalf("%+v: children %+v", tc.res, rec.children)
		}
		if c := rec.children[0]; c.Name != "Read" || !c.Success {
			t.Errorf("%+v: the tool that returned: %+v", tc.res, c)
		}
		c := rec.children[1]
		if c.Name != "Bash" || c.Success != tc.success {
			t.Errorf("%+v: the tool that never returned: %+v", tc.res, c)
		}
		if tc.success {
			if c.Metadata["result"].Str() != "none reported" || c.Error != "" {
				t.Errorf("%+v: %+v", tc.res, c)
			}
			continue
		}
		if c.Metadata["result"].Str() != "cancelled" || !strings.Contains(c.Error, "the call ended before the tool returned") ||
			!strings.Contains(c.Error, tc.why) {
			t.Errorf("%+v: recorded %q, %q; want cancelled and why (%s)", tc.res, c.Metadata["result"].Str(), c.Error, tc.why)
		}
	}
}

// End to end: a Claude stream that starts a Bash tool and hangs is killed
// at its timeout; the tool use is on the record as cancelled, the call's
// metadata names the containment.
func TestAgentRunTimeoutRecordsTheToolAsCancelled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "claude")
	stream := `{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"sleep 300"}}],"usage":{"input_tokens":1,"output_tokens":1}},"session_id":"s"}`
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nprintf '%s\\n' '"+stream+"'\nexec sleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	reg := capability.NewRegistry()
	o := AgentOptions{CLI: "claude", Allow: []string{"claude"}, LookPath: func(string) (string, error) { return bin, nil }}
	if err := Register(reg, Options{Workdir: dir, Env: os.Environ(), Agent: o}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, rec, err := runAgent(t, reg, `{:prompt "Fix it." :timeout-ms 1000}`)
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("err = %v, want the timeout (after %s)", err, time.Since(start))
	}
	if len(rec.children) != 1 || rec.children[0].Success || !strings.Contains(rec.children[0].Error, "timeout") {
		t.Fatalf("children = %+v, want the Bash use recorded as cancelled by the timeout", rec.children)
	}
	if got, want := res.Metadata["containment"], procgroup.DefaultContainment(procgroup.StartOptions{}); got != want {
		t.Errorf("containment %q, want %q", got, want)
	}
}
