package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ralphloop/ralph/ledger"
)

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

func (m *server) chainQuery(ctx context.Context, _ *mcp.CallToolRequest, in chainArg) (*mcp.CallToolResult, chainOut, error) {
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
	var st Reader
	var err error
	f := ledger.Filter{PlanID: in.PlanID, IntentID: in.IntentID, FromSeq: in.FromSeq}
	if in.RunID != "" {
		var r *Run
		if r, err = m.resolve(ctx, in.RunID); err == nil {
			st, f.RunID = r, r.ID
		}
	} else {
		st, err = m.o.Source.Store(ctx)
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

func (m *server) verifyChain(ctx context.Context, _ *mcp.CallToolRequest, in verifyArg) (*mcp.CallToolResult, verifyOut, error) {
	var st Reader
	var err error
	if in.RunID != "" {
		var r *Run
		if r, err = m.resolve(ctx, in.RunID); err == nil {
			st = r
		}
	} else {
		st, err = m.o.Source.Store(ctx)
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
