package builtin

import (
	"context"
	"slices"
	"testing"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/sandbox"
)

// Under a sandbox, a tool whose failed result says a path outside the
// workdir was refused ("cat: /root/.ssh/id_ed25519: Permission denied")
// puts that refusal, with its [sandbox] line, on the call and on the
// tool use's record; without one, the same result is only a failed tool.
func TestAgentRunReportsSandboxRefusedPaths(t *testing.T) {
	t.Parallel()
	r, _ := agentRegistry(t, "sandbox-refused", AgentOptions{CLI: "claude", Allow: []string{"claude"}})
	c := r.Get("agent.run")
	v, err := rtfs.ReadValue(`{:prompt "Read the key."}`)
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Spec.InputFrom([]rtfs.Value{v})
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.PathDenial(sandbox.OpRead, "/root/.ssh/id_ed25519")
	for _, sandboxed := range []bool{true, false} {
		sink := sandbox.NewSink()
		var shown []sandbox.Denial
		refs := sink.Open(func(d sandbox.Denial) { shown = append(shown, d) })
		if !sandboxed {
			refs = nil
		}
		rec := &recorder{}
		ctx := sandbox.WithRefusals(capability.WithReporter(context.Background(), rec), refs)
		if _, err := c.Handler(ctx, in); err != nil {
			t.Fatal(err)
		}
		got, _ := refs.Close()
		if len(rec.children) != 1 || rec.children[0].Success {
			t.Fatalf("sandboxed=%v: children %+v, want one failed tool use", sandboxed, rec.children)
		}
		meta := rec.children[0].Metadata["sandbox_denied"]
		if !sandboxed {
			if len(got) != 0 || !meta.IsNil() {
				t.Errorf("unsandboxed: refusals %v, tool metadata %v", got, meta)
			}
			continue
		}
		if !slices.Equal(got, []sandbox.Denial{want}) || !slices.Equal(shown, got) {
			t.Errorf("refusals %v (shown %v), want %v", got, shown, want)
		}
		if m := meta.AsMap(); m == nil || m.GetKey("what").Str() != want.What || m.GetKey("allow").Str() != want.Allow {
			t.Errorf("the tool use records %s, want %+v", rtfs.Print(meta), want)
		}
	}
}
