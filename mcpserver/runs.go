package mcpserver

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

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

func (m *server) runState(ctx context.Context, _ *mcp.CallToolRequest, in runArg) (*mcp.CallToolResult, runStateOut, error) {
	r, err := m.resolve(ctx, in.RunID)
	if err != nil {
		return nil, runStateOut{}, err
	}
	defer r.Close()
	out := runStateOut{Run: r.Record, Live: r.Live, Conditions: []verdict{}}
	if r.State != "" {
		out.Run.State = r.State
	}
	acts, err := r.ByRun(r.ID)
	if err != nil {
		return nil, out, err
	}
	if ev := lastEvaluation(acts, 0); ev != nil {
		out.EvaluatedAfterIteration, out.Conditions = ev.Iteration, verdicts(ev)
	}
	return nil, out, nil
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

func (m *server) whyStopped(ctx context.Context, _ *mcp.CallToolRequest, in runArg) (*mcp.CallToolResult, whyStoppedOut, error) {
	r, err := m.resolve(ctx, in.RunID)
	if err != nil {
		return nil, whyStoppedOut{}, err
	}
	defer r.Close()
	acts, err := r.ByRun(r.ID)
	if err != nil {
		return nil, whyStoppedOut{}, err
	}
	out := whyStoppedOut{RunID: r.ID, State: r.Record.State}
	if r.State != "" {
		out.State = r.State
	}
	for i := len(acts) - 1; i >= 0; i-- {
		if a := &acts[i]; loop.IsRunEnd(a.Type) {
			closing(&out, a, acts)
			return nil, out, nil
		}
	}
	out.Summary = fmt.Sprintf("run %s has not ended; its state is %s (run_state shows what is still failing)", r.ID, out.State)
	return nil, out, nil
}

// closing fills out from the run's closing action a.
func closing(out *whyStoppedOut, a *ledger.Action, acts []ledger.Action) {
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
	out.Summary = fmt.Sprintf("run %s ended (%s) after %d iteration(s): %s by %s — %s", out.RunID, a.Type, a.Metadata["iterations"].AsInt(), out.Class, out.Condition, out.Reason)
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

// maxDiff bounds the diff iteration_history returns.
const maxDiff = 64 << 10

func (m *server) iterationHistory(ctx context.Context, _ *mcp.CallToolRequest, in iterationArg) (*mcp.CallToolResult, iterationOut, error) {
	if in.Iteration < 0 {
		return nil, iterationOut{}, fmt.Errorf("iteration %d is not an iteration; the first is 1 (0: the last)", in.Iteration)
	}
	r, err := m.resolve(ctx, in.RunID)
	if err != nil {
		return nil, iterationOut{}, err
	}
	defer r.Close()
	acts, err := r.ByRun(r.ID)
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
		return nil, iterationOut{}, fmt.Errorf("run %s has no iteration %d; it has %d", r.ID, it, last)
	}
	out := iterationOf(r.ID, acts, it)
	out.Files, out.Diff, out.DiffNote = m.o.Source.Diff(ctx, r, acts, it)
	if len(out.Diff) > maxDiff {
		out.Diff = out.Diff[:maxDiff]
		out.DiffNote = fmt.Sprintf("the diff is cut at %d KiB; ralph diff %s %d prints it whole", maxDiff>>10, r.ID, it)
	}
	return nil, out, nil
}

// iterationOf is what iteration it of run id did: its status, its actions
// and the verdicts after it.
func iterationOf(id string, acts []ledger.Action, it int) iterationOut {
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
	return out
}
