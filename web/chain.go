package web

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/ledger"
)

// node is one action of the chain tree: an iteration holds what it
// recorded, each action the actions recorded under it (plans their steps,
// steps their calls, calls their tool uses).
type node struct {
	Seq       uint64
	RunID     string
	Type      string
	Label     string
	Detail    string
	Failed    bool
	Iteration int // an iteration's own node: its number
	Status    string
	Children  []*node
	// Folded says the iteration's actions were left out (only the last
	// iterations, and the one asked for, are shown whole); Count is how
	// many it recorded.
	Folded bool
	Open   bool
	Count  int
}

const (
	// shownIterations is how many of the last iterations show their actions.
	shownIterations = 20
	// maxNodes bounds the actions shown of one iteration.
	maxNodes = 2000
)

// chainOf is the run's chain as a tree: the actions before the first
// iteration, then each iteration with its actions nested by parent.
// focus names an iteration to show whole (0: none).
func chainOf(acts []ledger.Action, focus int) []*node {
	total := 0
	for i := range acts {
		if acts[i].Type == ledger.IterationStarted {
			total++
		}
	}
	var out []*node
	var cur *node
	var group []ledger.Action
	seen := 0
	flush := func() {
		switch {
		case cur == nil:
			out = append(out, nestActions(group)...)
		case cur.Folded:
			cur.Count = len(group)
		default:
			cur.Count, cur.Children = len(group), nestActions(group)
		}
		group = nil
	}
	for _, a := range acts {
		if a.Type == ledger.IterationStarted {
			flush()
			seen++
			cur = &node{Seq: a.Seq, RunID: a.RunID, Type: "iteration", Iteration: int(a.Metadata["iteration"].AsInt())}
			cur.Label = fmt.Sprintf("Iteration %d", cur.Iteration)
			// Only the last iterations, and the one asked for, show their
			// actions; the last one starts open.
			cur.Folded = seen <= total-shownIterations && cur.Iteration != focus
			cur.Open = cur.Iteration == focus || seen == total
			out = append(out, cur)
			continue
		}
		if a.Type == ledger.IterationCompleted && cur != nil {
			cur.Status = a.Metadata["status"].Str()
			cur.Failed = cur.Status != "ok"
			cur.Detail = fmt.Sprintf("%s · %s", cur.Status, cost(a.Cost))
		}
		group = append(group, a)
	}
	flush()
	return out
}

// withFolded puts, before the first iteration in nodes, one that stands
// for the first n iterations of run id, which were not read.
func withFolded(nodes []*node, id string, n int) []*node {
	i := 0
	for i < len(nodes) && nodes[i].Type != "iteration" {
		i++
	}
	f := &node{Type: "folded", RunID: id, Count: n, Label: fmt.Sprintf("Iterations 1 to %d", n)}
	return slices.Insert(nodes, i, f)
}

// nestActions puts each action under its parent when the parent is among
// acts (at most maxNodes of them).
func nestActions(acts []ledger.Action) []*node {
	byID := map[string]*node{}
	var top []*node
	for i, a := range acts {
		if i == maxNodes {
			top = append(top, &node{Type: "note", Label: fmt.Sprintf("%d more actions are left out; `ralph chain show --run %s --tree` shows them all", len(acts)-maxNodes, a.RunID)})
			break
		}
		n := actionNode(&a)
		if p, ok := byID[a.ParentActionID]; ok && a.ParentActionID != "" {
			p.Children = append(p.Children, n)
		} else {
			top = append(top, n)
		}
		byID[a.ActionID] = n
	}
	return top
}

// actionNode is one action as the tree shows it.
func actionNode(a *ledger.Action) *node {
	n := &node{Seq: a.Seq, Type: a.Type.String(), Label: a.Type.String(), Failed: !a.Success && a.ErrorMessage != ""}
	if a.FunctionName != "" {
		n.Label += " " + a.FunctionName
	}
	var d []string
	if a.DurationMS > 0 {
		d = append(d, fmt.Sprintf("%d ms", a.DurationMS))
	}
	if a.Cost > 0 {
		d = append(d, cost(a.Cost))
	}
	if a.ErrorMessage != "" {
		d = append(d, firstLine(a.ErrorMessage))
	}
	n.Detail = strings.Join(d, " · ")
	return n
}

func cost(usd float64) string { return fmt.Sprintf("$%.4f", usd) }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
