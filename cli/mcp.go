package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/serve"
	"github.com/ralphloop/ralph/stop"
)

// newMCPCmd is `ralph mcp`: a Model Context Protocol server over stdio
// (DESIGN §20) that lets an agent, or any MCP client, read a store's runs
// and, with --allow-control, steer the one running.
func newMCPCmd() *cobra.Command {
	var m mcpServer
	cmd := &cobra.Command{
		Use:   "mcp [--store DIR | --nats URL] [--allow-control]",
		Short: "Serve the store's runs to MCP clients (Claude Code, Codex, Gemini CLI) over stdio; read-only unless --allow-control",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m.errOut, m.signIn = cmd.ErrOrStderr(), signInFrom(cmd.Context())
			// A store that does not exist yet is no error: the server is
			// often registered before the first run, and each call says so.
			if m.nats != "" && m.store != "" {
				return usageErrorf("--store and --nats name two places to read; pass one")
			}
			srv := m.server()
			t := &mcp.IOTransport{Reader: io.NopCloser(cmd.InOrStdin()), Writer: nopWriteCloser{cmd.OutOrStdout()}}
			if err := srv.Run(cmd.Context(), t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
				return exitError(ExitFailure, fmt.Errorf("mcp: %w", err))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&m.store, "store", "", "the store `DIR` to serve (default: RALPH_STORE, else ./.ralph)")
	cmd.Flags().StringVar(&m.nats, "nats", "", "serve the runs of the fleet at NATS `URL` instead of a store")
	addNATSAuthFlags(cmd)
	cmd.Flags().BoolVar(&m.allowControl, "allow-control", false, "let clients pause, resume, skip an iteration of and abort the running loop")
	return cmd
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// mcpServer answers each tool call from the store as it is at that moment:
// through its socket while a ralph holds it, else opened read-only for the
// call, so the server never holds the store and never keeps a run from
// starting.
type mcpServer struct {
	store        string
	nats         string // a fleet instead of a store: each run's chain is rebuilt from its stream per call
	allowControl bool
	errOut       io.Writer
	signIn       *natsSignIn // --creds and --tls-ca, for the fleet's connections
}

// mcpReadOnly is the answer to a control without --allow-control.
var mcpReadOnly = errors.New("ralph mcp is read-only; start it with --allow-control to pause, resume, skip or abort runs")

func (m *mcpServer) server() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "ralph", Title: "ralph loop runner", Version: version}, &mcp.ServerOptions{
		Instructions: "ralph runs an agent in a loop until its stop conditions say the work is done. " +
			"Ask run_state what is still failing (each stop condition's verdict and evidence), why_stopped why a run ended, " +
			"iteration_history what one iteration did; run ids may be given as a unique prefix.",
	})
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
	return srv
}

func ptr[T any](v T) *T { return &v }

// read opens the store for one call; a fleet is read a run at a time.
func (m *mcpServer) read(ctx context.Context) (storeReader, error) {
	if m.nats != "" {
		return nil, errors.New("with --nats, name the run with run_id: a fleet's chains are kept one per run")
	}
	return openReader(ctx, m.store, ledger.Options{}, m.errOut)
}

// resolve opens the store and finds the run id names (a unique prefix will do).
func (m *mcpServer) resolve(ctx context.Context, id string) (storeReader, string, error) {
	if strings.TrimSpace(id) == "" {
		return nil, "", errors.New("run_id is empty; list_runs gives the ids")
	}
	var st storeReader
	var err error
	if m.nats != "" {
		st, err = openRunReader(withSignIn(ctx, m.signIn), "", m.nats, id, ledger.Options{}, m.errOut)
	} else {
		st, err = m.read(ctx)
	}
	if err != nil {
		return nil, "", err
	}
	full, err := resolveRun(st, id)
	if err != nil {
		st.Close()
		if strings.HasPrefix(err.Error(), "no run ") {
			return nil, "", fmt.Errorf("no run %s in store %s; list_runs gives the ids", id, st.Dir())
		}
		return nil, "", err
	}
	return st, full, nil
}

type runArg struct {
	RunID string `json:"run_id" jsonschema:"the run's id, or a unique prefix of it"`
}

type listRunsOut struct {
	Runs []loop.RunRecord `json:"runs"`
}

func (m *mcpServer) listRuns(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, listRunsOut, error) {
	if m.nats != "" {
		return m.fleetRuns(ctx)
	}
	st, err := m.read(ctx)
	if err != nil {
		return nil, listRunsOut{}, err
	}
	defer st.Close()
	runs, err := st.ListRuns()
	if runs == nil {
		runs = []loop.RunRecord{}
	}
	return nil, listRunsOut{Runs: runs}, err
}

// verdict is one stop condition's result as a client reads it.
type verdict struct {
	Name     string  `json:"name"`
	Kind     string  `json:"kind"`
	Class    string  `json:"class"`
	Met      bool    `json:"met"`
	Progress float64 `json:"progress"`
	Detail   string  `json:"detail,omitempty"`
	Reason   string  `json:"reason,omitempty"`
	Evidence string  `json:"evidence,omitempty"`
	TimedOut bool    `json:"timed_out,omitempty"`
	Error    string  `json:"error,omitempty"`
}

func verdicts(ev *stop.Evaluation) []verdict {
	out := []verdict{}
	if ev == nil {
		return out
	}
	for _, r := range ev.Results {
		out = append(out, verdict{Name: r.Name, Kind: r.Kind, Class: string(r.Class), Met: r.Met, Progress: r.Progress,
			Detail: r.Detail, Reason: r.Reason, Evidence: r.Evidence, TimedOut: r.TimedOut, Error: r.Err})
	}
	return out
}

type runStateOut struct {
	Run                     loop.RunRecord `json:"run"`
	Live                    bool           `json:"live" jsonschema:"a ralph process runs it now"`
	EvaluatedAfterIteration int            `json:"evaluated_after_iteration" jsonschema:"the iteration the verdicts were evaluated after (0: none yet)"`
	Conditions              []verdict      `json:"conditions"`
}

func (m *mcpServer) runState(ctx context.Context, _ *mcp.CallToolRequest, in runArg) (*mcp.CallToolResult, runStateOut, error) {
	st, id, err := m.resolve(ctx, in.RunID)
	if err != nil {
		return nil, runStateOut{}, err
	}
	defer st.Close()
	out := runStateOut{Run: runRecord(st, id), Conditions: []verdict{}}
	if info := st.Served(); info != nil && info.RunID == id {
		out.Live, out.Run.State = true, info.State
	}
	if fr, ok := st.(fleetReader); ok {
		out.Run, out.Live = fleetRecord(fr.run), fr.run.State == fleet.StateRunning
	}
	acts, err := st.ByRun(id)
	if err != nil {
		return nil, out, err
	}
	if ev := lastEvaluation(acts, 0); ev != nil {
		out.EvaluatedAfterIteration, out.Conditions = ev.Iteration, verdicts(ev)
	}
	return nil, out, nil
}

// runRecord is id's record, or one with the id alone (a chain imported
// without its run records).
func runRecord(st storeReader, id string) loop.RunRecord {
	runs, _ := st.ListRuns() // best effort: the chain itself is read next
	for _, r := range runs {
		if r.ID == id {
			return r
		}
	}
	return loop.RunRecord{ID: id}
}

// lastEvaluation is the last stop evaluation in acts (of iteration it,
// when it is not 0).
func lastEvaluation(acts []ledger.Action, it int) *stop.Evaluation {
	for i := len(acts) - 1; i >= 0; i-- {
		if acts[i].Type != ledger.StopConditionsEvaluated {
			continue
		}
		ev, err := stop.EvaluationFromAction(&acts[i])
		if err == nil && (it == 0 || ev.Iteration == it) {
			return &ev
		}
	}
	return nil
}

type whyStoppedOut struct {
	RunID     string   `json:"run_id"`
	Ended     bool     `json:"ended"`
	State     string   `json:"state"`
	Condition string   `json:"condition,omitempty"`
	Class     string   `json:"class,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	Evidence  string   `json:"evidence,omitempty"`
	Seq       uint64   `json:"seq,omitempty" jsonschema:"the closing action's seq"`
	Summary   string   `json:"summary"`
	Trigger   *verdict `json:"trigger,omitempty" jsonschema:"the stop condition's verdict that ended the run, when one did"`
}

func (m *mcpServer) whyStopped(ctx context.Context, _ *mcp.CallToolRequest, in runArg) (*mcp.CallToolResult, whyStoppedOut, error) {
	st, id, err := m.resolve(ctx, in.RunID)
	if err != nil {
		return nil, whyStoppedOut{}, err
	}
	defer st.Close()
	acts, err := st.ByRun(id)
	if err != nil {
		return nil, whyStoppedOut{}, err
	}
	out := whyStoppedOut{RunID: id, State: runRecord(st, id).State}
	if fr, ok := st.(fleetReader); ok {
		out.State = fr.run.State
	}
	for i := len(acts) - 1; i >= 0; i-- {
		a := &acts[i]
		if !loop.IsRunEnd(a.Type) {
			continue
		}
		out.Ended, out.Seq = true, a.Seq
		out.Condition, out.Class = a.Metadata["condition"].Str(), a.Metadata["class"].Str()
		out.Reason, out.Evidence = a.Metadata["reason"].Str(), a.Metadata["evidence"].Str()
		if ev := lastEvaluation(acts, 0); ev != nil {
			for _, v := range verdicts(ev) {
				if v.Name == out.Condition {
					out.Trigger = &v
				}
			}
		}
		out.Summary = fmt.Sprintf("run %s ended (%s) after %d iteration(s): %s by %s — %s", id, a.Type, a.Metadata["iterations"].AsInt(), out.Class, out.Condition, out.Reason)
		return nil, out, nil
	}
	out.Summary = fmt.Sprintf("run %s has not ended; its state is %s (run_state shows what is still failing)", id, out.State)
	return nil, out, nil
}

type iterationArg struct {
	RunID     string `json:"run_id" jsonschema:"the run's id, or a unique prefix of it"`
	Iteration int    `json:"iteration,omitempty" jsonschema:"the iteration (1 is the first); 0 or absent: the last one"`
}

type actionLine struct {
	Seq        uint64  `json:"seq"`
	Type       string  `json:"type"`
	Function   string  `json:"function"`
	Success    bool    `json:"success"`
	Error      string  `json:"error,omitempty"`
	DurationMS int64   `json:"duration_ms"`
	CostUSD    float64 `json:"cost_usd,omitempty"`
}

type iterationOut struct {
	RunID      string          `json:"run_id"`
	Iteration  int             `json:"iteration"`
	Status     string          `json:"status" jsonschema:"ok, failed, skipped, refused, cancelled, provider-error, usage-limit; empty while it runs"`
	Error      string          `json:"error,omitempty"`
	Actions    []actionLine    `json:"actions"`
	Conditions []verdict       `json:"conditions" jsonschema:"the stop conditions' verdicts after the iteration"`
	Files      []gitx.FileStat `json:"files,omitempty" jsonschema:"the files the iteration changed, from its checkpoints (ralph diff --json)"`
	Diff       string          `json:"diff,omitempty" jsonschema:"the iteration's unified diff (its first 64 KiB), as ralph diff RUN N prints it"`
	DiffNote   string          `json:"diff_note,omitempty" jsonschema:"why there is no diff: no checkpoints, a workdir gone, a fleet run"`
}

// maxMCPDiff bounds the diff iteration_history returns.
const maxMCPDiff = 64 << 10

// mcpIterationDiff fills out's files and diff from the run's checkpoints of
// iterations it-1 and it, or says why there are none.
func mcpIterationDiff(ctx context.Context, out *iterationOut, acts []ledger.Action, it int) {
	rc, err := readCheckpoints(out.RunID, acts)
	var repo *gitx.Repo
	var cs []string
	if err == nil {
		repo, cs, err = rc.need(ctx, it-1, it)
	}
	if err == nil {
		out.Files, err = repo.DiffStat(ctx, cs[0], cs[1])
	}
	var b strings.Builder
	if err == nil {
		err = repo.Diff(ctx, &b, cs[0], cs[1], false, false)
	}
	if err != nil {
		out.Files, out.DiffNote = nil, err.Error()
		return
	}
	out.Diff = b.String()
	if len(out.Diff) > maxMCPDiff {
		out.Diff = out.Diff[:maxMCPDiff]
		out.DiffNote = fmt.Sprintf("the diff is cut at %d KiB; ralph diff %s %d prints it whole", maxMCPDiff>>10, out.RunID, it)
	}
}

func (m *mcpServer) iterationHistory(ctx context.Context, _ *mcp.CallToolRequest, in iterationArg) (*mcp.CallToolResult, iterationOut, error) {
	if in.Iteration < 0 {
		return nil, iterationOut{}, fmt.Errorf("iteration %d is not an iteration; the first is 1 (0: the last)", in.Iteration)
	}
	st, id, err := m.resolve(ctx, in.RunID)
	if err != nil {
		return nil, iterationOut{}, err
	}
	defer st.Close()
	acts, err := st.ByRun(id)
	if err != nil {
		return nil, iterationOut{}, err
	}
	last := 0
	for _, a := range acts {
		if a.Type == ledger.IterationStarted {
			last = max(last, int(a.Metadata["iteration"].AsInt()))
		}
	}
	it := in.Iteration
	if it == 0 {
		it = last
	}
	if it == 0 || it > last {
		return nil, iterationOut{}, fmt.Errorf("run %s has no iteration %d; it has %d", id, it, last)
	}
	out := iterationOut{RunID: id, Iteration: it, Actions: []actionLine{}, Conditions: []verdict{}}
	cur := 0
	for _, a := range acts {
		switch a.Type {
		case ledger.IterationStarted:
			cur = int(a.Metadata["iteration"].AsInt())
		case ledger.StopConditionsEvaluated, ledger.RunStarted:
			continue
		}
		if cur != it || loop.IsRunEnd(a.Type) {
			continue
		}
		out.Actions = append(out.Actions, actionLine{Seq: a.Seq, Type: a.Type.String(), Function: a.FunctionName, Success: a.Success,
			Error: a.ErrorMessage, DurationMS: a.DurationMS, CostUSD: a.Cost})
		if a.Type == ledger.IterationCompleted {
			out.Status, out.Error = a.Metadata["status"].Str(), a.ErrorMessage
		}
	}
	out.Conditions = verdicts(lastEvaluation(acts, it))
	if _, fleetRun := st.(fleetReader); fleetRun {
		out.DiffNote = "a fleet run's checkpoints are commits on its branch ralph/" + id + " in the workspace's repository, not here"
	} else {
		mcpIterationDiff(ctx, &out, acts, it)
	}
	return nil, out, nil
}

type chainArg struct {
	RunID    string `json:"run_id,omitempty" jsonschema:"only this run's actions (an id or unique prefix)"`
	PlanID   string `json:"plan_id,omitempty" jsonschema:"only this plan's actions"`
	IntentID string `json:"intent_id,omitempty" jsonschema:"only this intent's actions"`
	Type     string `json:"type,omitempty" jsonschema:"only actions of this type, e.g. CapabilityCall, HookRan, StopConditionsEvaluated"`
	FromSeq  uint64 `json:"from_seq,omitempty" jsonschema:"start at this seq"`
	Limit    int    `json:"limit,omitempty" jsonschema:"at most this many actions (default 50, at most 500)"`
}

type chainOut struct {
	Actions []any `json:"actions" jsonschema:"the actions, as ralph chain show --json writes them"`
	More    bool  `json:"more" jsonschema:"more actions match: ask again from the seq after the last"`
}

var errEnough = errors.New("enough actions")

func (m *mcpServer) chainQuery(ctx context.Context, _ *mcp.CallToolRequest, in chainArg) (*mcp.CallToolResult, chainOut, error) {
	limit := in.Limit
	switch {
	case limit == 0:
		limit = 50
	case limit < 0 || limit > 500:
		return nil, chainOut{}, fmt.Errorf("limit %d is out of range; ask for 1 to 500 actions", limit)
	}
	var typ ledger.ActionType
	if in.Type != "" {
		var err error
		if typ, err = ledger.ParseActionType(in.Type); err != nil {
			return nil, chainOut{}, fmt.Errorf("type %q is not an action type; use one such as CapabilityCall, IterationCompleted or HookRan", in.Type)
		}
	}
	var st storeReader
	var err error
	f := ledger.Filter{PlanID: in.PlanID, IntentID: in.IntentID, FromSeq: in.FromSeq}
	if in.RunID != "" {
		st, f.RunID, err = m.resolve(ctx, in.RunID)
	} else {
		st, err = m.read(ctx)
	}
	if err != nil {
		return nil, chainOut{}, err
	}
	defer st.Close()
	out := chainOut{Actions: []any{}}
	err = st.Select(f, func(a ledger.Action) error {
		if typ != ledger.TypeInvalid && a.Type != typ {
			return nil
		}
		if len(out.Actions) == limit {
			out.More = true
			return errEnough
		}
		b, err := json.Marshal(a)
		if err != nil {
			return err
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		out.Actions = append(out.Actions, v)
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return nil, chainOut{}, err
	}
	return nil, out, nil
}

type verifyOut struct {
	OK          bool          `json:"ok"`
	Actions     uint64        `json:"actions"`
	Checkpoints uint64        `json:"checkpoints"`
	HeadSeq     uint64        `json:"head_seq"`
	VerifierKey string        `json:"verifier_key"`
	Problems    []problemLine `json:"problems"`
}

type problemLine struct {
	Seq    uint64 `json:"seq"`
	Reason string `json:"reason"`
}

type verifyArg struct {
	RunID string `json:"run_id,omitempty" jsonschema:"with --nats: the run whose replicated chain to verify; a store is verified whole"`
}

func (m *mcpServer) verifyChain(ctx context.Context, _ *mcp.CallToolRequest, in verifyArg) (*mcp.CallToolResult, verifyOut, error) {
	var st storeReader
	var err error
	if m.nats != "" {
		st, _, err = m.resolve(ctx, in.RunID)
	} else {
		st, err = m.read(ctx)
	}
	if err != nil {
		return nil, verifyOut{}, err
	}
	defer st.Close()
	rep, err := st.VerifyWith(ctx, ledger.VerifyOptions{})
	var ie *ledger.IntegrityError
	if err != nil && !errors.As(err, &ie) {
		return nil, verifyOut{}, err
	}
	out := verifyOut{OK: rep.OK(), Actions: rep.Actions, Checkpoints: rep.Checkpoints, HeadSeq: rep.Head.Seq,
		VerifierKey: rep.TrustedKey, Problems: []problemLine{}}
	for _, p := range rep.Problems {
		out.Problems = append(out.Problems, problemLine{Seq: p.Seq, Reason: p.Reason})
	}
	return nil, out, nil
}

type controlOut struct {
	RunID string `json:"run_id"`
	Done  string `json:"done"`
}

// control sends do to the run, which must be the one a ralph process runs
// on the store now.
func (m *mcpServer) control(ctx context.Context, in runArg, do string) (*mcp.CallToolResult, controlOut, error) {
	if !m.allowControl {
		return nil, controlOut{}, mcpReadOnly
	}
	st, id, err := m.resolve(ctx, in.RunID)
	if err != nil {
		return nil, controlOut{}, err
	}
	defer st.Close()
	if fr, ok := st.(fleetReader); ok {
		if fr.run.State != fleet.StateRunning {
			return nil, controlOut{}, fmt.Errorf("run %s is not running (its state in the fleet is %s); only a run a worker runs now can be steered", id, fr.run.State)
		}
		signer, err := m.signIn.signer()
		if err != nil {
			return nil, controlOut{}, err
		}
		if err := fleet.Control(ctx, fr.conn.nc, signer, id, do); err != nil {
			return nil, controlOut{}, err
		}
		return nil, controlOut{RunID: id, Done: do + " requested"}, nil
	}
	info := st.Served()
	if info == nil || info.RunID != id {
		return nil, controlOut{}, fmt.Errorf("run %s is not running (its state is %s); only the loop a ralph process runs now can be steered", id, runRecord(st, id).State)
	}
	c, err := serve.Dial(ctx, st.Dir())
	if err != nil {
		return nil, controlOut{}, err
	}
	defer c.Close()
	if err := c.Control(ctx, do, 0); err != nil {
		return nil, controlOut{}, err
	}
	return nil, controlOut{RunID: id, Done: do + " requested"}, nil
}

// fleetRuns is list_runs for a fleet: every run's state as its workers
// recorded it.
func (m *mcpServer) fleetRuns(ctx context.Context) (*mcp.CallToolResult, listRunsOut, error) {
	f, err := dialFleet(withSignIn(ctx, m.signIn), m.nats, "ralph mcp")
	if err != nil {
		return nil, listRunsOut{}, err
	}
	defer f.Close()
	states, err := f.states(ctx)
	if err != nil {
		return nil, listRunsOut{}, err
	}
	out := listRunsOut{Runs: []loop.RunRecord{}}
	for _, s := range states {
		out.Runs = append(out.Runs, fleetRecord(s))
	}
	return nil, out, nil
}

// fleetRecord is a fleet run's state as a run record.
func fleetRecord(s fleet.RunState) loop.RunRecord {
	r := loop.RunRecord{ID: s.RunID, State: s.State, Goal: s.Goal, Class: s.Class, Condition: s.Condition, Reason: s.Reason,
		Iterations: s.Iteration, CostUSD: s.CostUSD, Tokens: s.Tokens}
	if !s.Started.IsZero() {
		r.Started = s.Started.UTC().Format(time.RFC3339)
	}
	return r
}
