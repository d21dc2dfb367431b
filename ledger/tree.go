package ledger

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// TreeNode is an action with the actions whose parent it is.
type TreeNode struct {
	Action   Action
	Children []*TreeNode
}

// BuildTree arranges actions by parent_action_id. An action whose parent
// is not among actions is a root. Roots and children keep the order of
// actions (seq order when they come from the store).
func BuildTree(actions []Action) []*TreeNode {
	nodes := make(map[string]*TreeNode, len(actions))
	all := make([]*TreeNode, len(actions))
	for i := range actions {
		n := &TreeNode{Action: actions[i]}
		all[i] = n
		if _, dup := nodes[n.Action.ActionID]; !dup {
			nodes[n.Action.ActionID] = n
		}
	}
	var roots []*TreeNode
	for _, n := range all {
		if p, ok := nodes[n.Action.ParentActionID]; ok && n.Action.ParentActionID != "" && p != n {
			p.Children = append(p.Children, n)
			continue
		}
		roots = append(roots, n)
	}
	return roots
}

// WriteTree prints roots and their descendants, one action per line, with
// box-drawing branches:
//
//	#1 RunStarted run ok
//	├─ #2 PlanStarted plan ok
//	│  └─ #3 CapabilityCall ccos.echo ok 4ms
//	└─ #4 RunCompleted run ok
func WriteTree(w io.Writer, roots []*TreeNode) error {
	bw := bufio.NewWriter(w)
	var walk func(n *TreeNode, prefix, branch string)
	walk = func(n *TreeNode, prefix, branch string) {
		bw.WriteString(prefix)
		bw.WriteString(branch)
		bw.WriteString(Summary(&n.Action))
		bw.WriteByte('\n')
		childPrefix := prefix
		switch branch {
		case "├─ ":
			childPrefix += "│  "
		case "└─ ":
			childPrefix += "   "
		}
		for i, c := range n.Children {
			b := "├─ "
			if i == len(n.Children)-1 {
				b = "└─ "
			}
			walk(c, childPrefix, b)
		}
	}
	for _, r := range roots {
		walk(r, "", "")
	}
	return bw.Flush()
}

// Summary is the one-line form of an action used by trees and listings:
// seq, type, function name, outcome, and duration and cost when set. The
// outcome is "ok", "FAILED (message)", or "! exit 1" / "! idle-timeout" for
// a call that ran but reported failure (Action.ReportedFailure).
func Summary(a *Action) string {
	var b strings.Builder
	b.WriteByte('#')
	b.WriteString(strconv.FormatUint(a.Seq, 10))
	b.WriteByte(' ')
	b.WriteString(a.Type.String())
	if a.FunctionName != "" {
		b.WriteByte(' ')
		b.WriteString(a.FunctionName)
	}
	switch r := a.ReportedFailure(); {
	case r != "":
		b.WriteString(" ! ")
		b.WriteString(r)
	case a.Metadata["stopped"].Str() == "cancelled" && a.Metadata["cancelled_by"].Str() != "":
		// Cut short by a skip, an abort, a signal (a skipped iteration
		// itself succeeds: the loop goes on).
		b.WriteString(" CANCELLED by " + a.Metadata["cancelled_by"].Str())
	case a.Success:
		b.WriteString(" ok")
	default:
		b.WriteString(" FAILED")
	}
	if !a.Success {
		if a.ErrorMessage != "" {
			msg := a.ErrorMessage
			if i := strings.IndexByte(msg, '\n'); i >= 0 {
				msg = msg[:i] + " …"
			}
			if r := []rune(msg); len(r) > 120 {
				msg = string(r[:117]) + "..."
			}
			fmt.Fprintf(&b, " (%s)", msg)
		}
	}
	if a.DurationMS > 0 {
		fmt.Fprintf(&b, " %dms", a.DurationMS)
	}
	if a.Cost != 0 {
		fmt.Fprintf(&b, " $%.4f", a.Cost)
	}
	return b.String()
}
