package capability

import (
	"context"
	"time"

	"github.com/ralphloop/ralph/rtfs"
)

// Reporter is how a running call tells its host more than its result: the
// actions it took that belong under the call on the causal chain, events
// for whoever watches the run live, and an account limit that stopped it.
// The host (the orchestrator) puts one in each handler's context; a
// handler reaches it with ReporterFrom and never needs to know who records
// or who watches.
type Reporter interface {
	// Child records an action as a child of the running call (an agent's
	// tool use) and returns once it is recorded. An error means the record
	// could not be written; the handler should stop.
	Child(ctx context.Context, c Child) error
	// Stream publishes a transient event (streamed agent output) to live
	// observers. It never blocks; events a slow observer cannot take are
	// dropped for that observer only.
	Stream(event any)
	// Limited reports that the call stopped at an account limit of the
	// service behind it; the loop waits until it lifts and runs the
	// iteration again.
	Limited(l Limit)
	// Denied reports that the call could not do its work because a tool
	// it needed was refused for want of permission (an agent CLI run
	// without the flags that let it edit): the loop stops the run after
	// this iteration, since every later one would be refused the same.
	Denied(d Denial)
}

// Denial is a call's refused tool: Tool and Target (a path or a command)
// as the CLI named them, and Fix, one sentence saying what to allow.
type Denial struct {
	Tool, Target, Fix string
}

// Child is one action a call reports under itself. Type is the action
// type's name on the chain (e.g. "AgentToolUse").
type Child struct {
	Type       string
	Name       string // the function name: the tool the agent used
	Args       []rtfs.Value
	Result     rtfs.Value
	Success    bool
	Error      string
	DurationMS int64
	Metadata   map[string]rtfs.Value
}

// Limit is an account limit a call ran into: Kind is "usage-limit",
// "rate-limit" or "overloaded"; Reset is when it lifts (zero when the
// service did not say).
type Limit struct {
	Kind    string
	Reset   time.Time
	Message string
}

type reporterKey struct{}

// WithReporter returns ctx carrying rep for the handler it is passed to.
func WithReporter(ctx context.Context, rep Reporter) context.Context {
	return context.WithValue(ctx, reporterKey{}, rep)
}

// ReporterFrom returns the reporter in ctx, or one that discards
// everything (a handler called outside an orchestrator, as in tests).
func ReporterFrom(ctx context.Context) Reporter {
	if rep, ok := ctx.Value(reporterKey{}).(Reporter); ok && rep != nil {
		return rep
	}
	return discard{}
}

type discard struct{}

func (discard) Child(context.Context, Child) error { return nil }
func (discard) Stream(any)                         {}
func (discard) Limited(Limit)                      {}
func (discard) Denied(Denial)                      {}

// OutputFile is where a call writes the whole output of what it runs (an
// agent's printout), so that what it records can stay bounded: Path is
// the file to create (its directory may not exist yet), Rel the same path
// relative to the store, as the call records it, and Redact the values
// the host keeps off its records, to be written as [REDACTED].
type OutputFile struct {
	Path, Rel string
	Redact    []string
}

type outputFileKey struct{}

// WithOutputFile returns ctx giving the handler f for its output.
func WithOutputFile(ctx context.Context, f OutputFile) context.Context {
	return context.WithValue(ctx, outputFileKey{}, f)
}

// OutputFileFrom returns the output file the host gave the running call;
// ok is false when it keeps none (a handler called outside a run).
func OutputFileFrom(ctx context.Context) (f OutputFile, ok bool) {
	f, ok = ctx.Value(outputFileKey{}).(OutputFile)
	return f, ok
}
