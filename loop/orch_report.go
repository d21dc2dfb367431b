package loop

import (
	"context"
	"fmt"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/capability/builtin"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// CallStream is one transient event a running call published (an agent's
// streamed output), with the call it belongs to.
type CallStream struct {
	CallID     string // the CapabilityCall's action id (recorded when the call ends)
	Capability string // e.g. "agent.run"
	Event      any    // *agent.Event for agent.run
}

// Printout says whether a call of capability id prints what an agent says
// and does (its spec's Printout, capability/builtin): live, its streamed events
// come as CallStreams; a view of a recorded run shows that call's output
// again.
func Printout(id string) bool {
	s, ok := builtin.Lookup(id)
	return ok && s.Printout
}

// callReporter is the capability.Reporter of one call. The call's action
// id is fixed before its handler runs, so the children it reports are
// recorded under it as they happen, before the call itself is recorded
// when it ends; a crash in between leaves the children, naming the call
// that never closed.
type callReporter struct {
	r      *run
	callID string
	capID  string
}

func (c *callReporter) Child(ctx context.Context, ch capability.Child) error {
	t, err := ledger.ParseActionType(ch.Type)
	if err != nil {
		return fmt.Errorf("%s reported a child action: %w", c.capID, err)
	}
	meta := make(map[string]rtfs.Value, len(ch.Metadata))
	for k, v := range ch.Metadata {
		meta[k] = dataOnly(v)
	}
	_, err = c.r.record(ctx, &ledger.Action{Type: t, ParentActionID: c.callID, FunctionName: ch.Name,
		Arguments: dataArgs(ch.Args), Result: dataOnly(ch.Result), Success: ch.Success, ErrorMessage: ch.Error,
		DurationMS: ch.DurationMS, Metadata: meta})
	return err
}

func (c *callReporter) Stream(ev any) {
	if s := c.r.in.Stream; s != nil {
		s(CallStream{CallID: c.callID, Capability: c.capID, Event: ev})
	}
}

func (c *callReporter) Limited(l capability.Limit) {
	c.r.stats.mu.Lock()
	if c.r.stats.limit == nil {
		c.r.stats.limit = &l
	}
	c.r.stats.mu.Unlock()
}

func (c *callReporter) Denied(d capability.Denial) {
	c.r.stats.mu.Lock()
	if c.r.stats.denial == nil {
		c.r.stats.denial = &d
	}
	c.r.stats.mu.Unlock()
}
