// Package mcpserver is ralph's Model Context Protocol server (DESIGN §20):
// tools that let an agent, or any MCP client, read a store's or a fleet's
// runs (their state with each stop condition's verdict and evidence, why
// one stopped, what an iteration did and changed, the chain, its
// verification) and, when allowed, steer the running one. It reads through
// a Source, which ralph mcp binds to a store (through its socket while a
// ralph holds it) or to a fleet; each call opens what it reads and closes
// it again, so the server never keeps a run from starting.
package mcpserver

import (
	"context"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// Reader is what a tool reads of a store (or of a run's chain rebuilt
// from a fleet).
type Reader interface {
	ListRuns() ([]loop.RunRecord, error)
	ByRun(runID string) ([]ledger.Action, error)
	Select(f ledger.Filter, fn func(ledger.Action) error) error
	VerifyWith(ctx context.Context, opts ledger.VerifyOptions) (ledger.VerifyReport, error)
	Close() error
}

// Run is a run a Source opened for one call: the reader holding it, its
// full id, and what is known of it beyond its chain.
type Run struct {
	Reader
	ID string
	// Record is its run record, State overriding the record's when set
	// (a live run's, a fleet's), and Live whether a process runs it now.
	Record loop.RunRecord
	State  string
	Live   bool
	// Handle is the Source's own (a fleet run's state), for Control and
	// Diff.
	Handle any
}

// Source is where the server reads and what it steers.
type Source interface {
	// Store opens the whole store for one call (an error for a fleet,
	// whose chains are kept one per run).
	Store(ctx context.Context) (Reader, error)
	// Run opens the run id names (a unique prefix will do).
	Run(ctx context.Context, id string) (*Run, error)
	// Runs lists every run, oldest first.
	Runs(ctx context.Context) ([]loop.RunRecord, error)
	// Control sends do (pause, resume, skip, abort) to the run, which must
	// be running now.
	Control(ctx context.Context, r *Run, do string) error
	// Diff is what iteration it of the run changed, from its checkpoints:
	// the files with added and deleted lines and the unified diff, or a
	// note saying why there are none.
	Diff(ctx context.Context, r *Run, acts []ledger.Action, it int) (files []gitx.FileStat, diff, note string)
}

// Options configure the server.
type Options struct {
	Source Source
	// AllowControl lets clients pause, resume, skip and abort (ralph mcp
	// --allow-control); without it every control is refused.
	AllowControl bool
	Version      string
}

// errReadOnly is the answer to a control without AllowControl.
var errReadOnly = errors.New("ralph mcp is read-only; start it with --allow-control to pause, resume, skip or abort runs")

// server answers each tool call from its Source.
type server struct{ o Options }

// New is the MCP server of o's Source.
func New(o Options) *mcp.Server {
	m := &server{o: o}
	srv := mcp.NewServer(&mcp.Implementation{Name: "ralph", Title: "ralph loop runner", Version: o.Version}, &mcp.ServerOptions{
		Instructions: "ralph runs an agent in a loop until its stop conditions say the work is done. " +
			"Ask run_state what is still failing (each stop condition's verdict and evidence), why_stopped why a run ended, " +
			"iteration_history what one iteration did; run ids may be given as a unique prefix.",
	})
	m.addReadTools(srv)
	m.addControls(srv)
	return srv
}

// addReadTools adds the read-only tools.
func (m *server) addReadTools(srv *mcp.Server) {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(srv, &mcp.Tool{Name: "list_runs", Annotations: ro,
		Description: "List the store's runs, oldest first: id, state, goal, iterations, cost, tokens and, for an ended run, the condition, class and reason it stopped."}, m.listRuns)
	mcp.AddTool(srv, &mcp.Tool{Name: "run_state", Annotations: ro,
		Description: "A run's state and each stop condition's latest verdict with its evidence: what is still failing."}, m.runState)
	mcp.AddTool(srv, &mcp.Tool{Name: "why_stopped", Annotations: ro,
		Description: "Why a run ended: the stop condition, its class, the reason and the evidence (or that it has not ended)."}, m.whyStopped)
	mcp.AddTool(srv, &mcp.Tool{Name: "iteration_history", Annotations: ro,
		Description: "What one iteration of a run did: its status, every action recorded in it (capability calls, tool uses, hooks), the stop conditions' verdicts after it, and what it changed in the work tree (files with added and deleted lines, and the diff, from the run's checkpoints; diff_note says why when there is none)."}, m.iterationHistory)
	mcp.AddTool(srv, &mcp.Tool{Name: "chain_query", Annotations: ro,
		Description: "Actions of the causal chain in seq order, in ralph's JSON form, selected by run, plan, intent, action type and starting seq; at most limit (default 50, at most 500)."}, m.chainQuery)
	mcp.AddTool(srv, &mcp.Tool{Name: "verify_chain", Annotations: ro,
		Description: "Verify the whole chain: every hash, link, checkpoint signature, Merkle root and index; reports the problems found, first bad seq first."}, m.verifyChain)
}

// addControls adds the tools that steer the running loop.
func (m *server) addControls(srv *mcp.Server) {
	for _, c := range []struct{ name, do, what string }{
		{"pause_run", "pause", "Pause the running loop after the step that is executing."},
		{"resume_run", "resume", "Resume a paused loop."},
		{"skip_iteration", "skip", "Cancel the running iteration (its compensations run); the loop goes on with the next."},
		{"abort_run", "abort", "Abort the running loop: compensations run and it ends as aborted."},
	} {
		desc := c.what + " Needs ralph mcp --allow-control."
		mcp.AddTool(srv, &mcp.Tool{Name: c.name, Description: desc, Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(c.do == "abort" || c.do == "skip")}},
			func(ctx context.Context, _ *mcp.CallToolRequest, in runArg) (*mcp.CallToolResult, controlOut, error) {
				return m.control(ctx, in, c.do)
			})
	}
}

func ptr[T any](v T) *T { return &v }

// resolve opens the run id names.
func (m *server) resolve(ctx context.Context, id string) (*Run, error) {
	if strings.TrimSpace(id) == "" {
		return nil, errors.New("run_id is empty; list_runs gives the ids")
	}
	return m.o.Source.Run(ctx, id)
}

type runArg struct {
	RunID string `json:"run_id" jsonschema:"the run's id, or a unique prefix of it"`
}

type listRunsOut struct {
	Runs []loop.RunRecord `json:"runs"`
}

func (m *server) listRuns(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, listRunsOut, error) {
	runs, err := m.o.Source.Runs(ctx)
	if runs == nil {
		runs = []loop.RunRecord{}
	}
	return nil, listRunsOut{Runs: runs}, err
}

type controlOut struct {
	RunID string `json:"run_id"`
	Done  string `json:"done"`
}

// control sends do to the run, which must be running now.
func (m *server) control(ctx context.Context, in runArg, do string) (*mcp.CallToolResult, controlOut, error) {
	if !m.o.AllowControl {
		return nil, controlOut{}, errReadOnly
	}
	r, err := m.resolve(ctx, in.RunID)
	if err != nil {
		return nil, controlOut{}, err
	}
	defer r.Close()
	if err := m.o.Source.Control(ctx, r, do); err != nil {
		return nil, controlOut{}, err
	}
	return nil, controlOut{RunID: r.ID, Done: do + " requested"}, nil
}
