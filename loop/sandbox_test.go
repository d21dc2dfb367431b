package loop

import (
	"context"
	"sync"
	"testing"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/sandbox"
)

// The run's sandbox is on the context of everything the run does: the
// provider's planning (a command model starts its process with it), the
// iteration's end and the followers ([[notify]] commands), as on the
// plan's calls and stop checks, which get the same context. RunStarted
// records its mechanism; a run with none records no sandbox key.
func TestRunPutsItsSandboxOnItsContext(t *testing.T) {
	t.Parallel()
	const cfg = `
[plan]
rtfs = '(step "Echo" (call :ccos.echo {:message "hi"}))'
[[stop]]
name = "one"
kind = "max_iterations"
max = 1
`
	for _, sb := range []*sandbox.Sandbox{nil, {}} {
		var mu sync.Mutex
		seen := map[string]*sandbox.Sandbox{}
		note := func(where string, ctx context.Context) {
			mu.Lock()
			defer mu.Unlock()
			seen[where] = sandbox.From(ctx)
		}
		plan := `(step "Echo" (call :ccos.echo {:message "hi"}))`
		r, fx := newRunner(t, cfg, providerFunc(func(ctx context.Context, req arbiter.PlanRequest) (arbiter.PlanResponse, error) {
			note("provider", ctx)
			return arbiter.StaticProvider{Source: plan}.Plan(ctx, req)
		}))
		r.o.Sandbox = sb
		r.o.OnIterationEnd = func(ctx context.Context, _ int) (map[string]rtfs.Value, error) {
			note("iteration end", ctx)
			return nil, nil
		}
		r.o.Follow = func(ctx context.Context, events <-chan Event) <-chan struct{} {
			note("follow", ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for e := range events {
					if e.Kind == EventAction && IsRunEnd(e.Action.Type) {
						return
					}
				}
			}()
			return done
		}
		out, err := r.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, where := range []string{"provider", "iteration end", "follow"} {
			if got, ok := seen[where]; !ok || got != sb {
				t.Errorf("sandbox %p: the %s's context carries %p (seen %v)", sb, where, got, ok)
			}
		}
		started := runTypes(t, fx, out.RunID, ledger.RunStarted)
		if _, has := started[0].Metadata["sandbox"]; has != (sb != nil) {
			t.Errorf("sandbox %p: RunStarted's metadata %v", sb, started[0].Metadata)
		}
	}
}
