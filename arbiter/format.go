package arbiter

import (
	"strings"

	"github.com/ralphloop/ralph/rtfs"
)

// formatWidth is the line length past which a form holding steps breaks.
const formatWidth = 100

// FormatPlan prints plan forms canonically (rtfs.PrintNode: sorted map keys,
// single spaces, no comments) and lays out the plan structure: the children
// of do, plan, step-parallel and step.with-compensation go on their own
// indented lines, and so does the body of any form that holds steps and
// would not fit on one line. Reading the result gives the same forms as
// rtfs.PrintProgram.
func FormatPlan(forms []*rtfs.Node) string {
	var b strings.Builder
	for _, f := range forms {
		formatNode(&b, f, 0)
		b.WriteByte('\n')
	}
	return b.String()
}

// structural forms always put their children on separate lines.
var structural = map[string]bool{"do": true, "plan": true, rtfs.FormStepParallel: true, rtfs.FormWithCompensation: true}

// headerArgs is how many items after the head stay on the first line when
// a form breaks: (step "Name" …), (let [bindings] …), (if test …).
var headerArgs = map[string]int{rtfs.FormStep: 1, rtfs.FormStepLoop: 2, "let": 1, "if": 1, "when": 1, "when-not": 1, "fn": 1,
	"loop": 1, "doseq": 1, "dotimes": 1, "for": 1, "if-let": 1, "when-let": 1, "if-some": 1, "when-some": 1,
	"letfn": 1, "case": 1, "condp": 2, "match": 1}

func formatNode(b *strings.Builder, n *rtfs.Node, indent int) {
	head := n.Head()
	if head == "" || !structural[head] && !holdsSteps(n) {
		b.WriteString(rtfs.PrintNode(n))
		return
	}
	if !structural[head] {
		if flat := rtfs.PrintNode(n); indent+len(flat) <= formatWidth {
			b.WriteString(flat)
			return
		}
	}
	if n.Meta != nil {
		b.WriteString("^" + rtfs.PrintNode(n.Meta) + " ")
	}
	b.WriteByte('(')
	b.WriteString(rtfs.PrintNode(n.Items[0]))
	rest := n.Items[1:]
	keep := headerArgs[head]
	if head == "plan" {
		keep = planHeader(rest)
	}
	keep = min(keep, len(rest))
	for _, it := range rest[:keep] {
		b.WriteByte(' ')
		b.WriteString(rtfs.PrintNode(it))
	}
	rest = rest[keep:]
	if head == "plan" && len(rest) == 2 && rest[0].Kind == rtfs.NodeAtom && rest[0].Val.Kind() == rtfs.KindKeyword {
		// (plan :program (do …)): the body follows its key.
		b.WriteString("\n" + strings.Repeat(" ", indent+2) + rtfs.PrintNode(rest[0]) + " ")
		formatNode(b, rest[1], indent+2)
		b.WriteByte(')')
		return
	}
	for _, it := range rest {
		b.WriteString("\n" + strings.Repeat(" ", indent+2))
		formatNode(b, it, indent+2)
	}
	b.WriteByte(')')
}

// planHeader keeps every :key value pair of (plan …) but the last on the
// first line, so that :program and its body come last.
func planHeader(items []*rtfs.Node) int {
	if len(items) < 2 || items[0].Kind != rtfs.NodeAtom || items[0].Val.Kind() != rtfs.KindKeyword || len(items)%2 != 0 {
		return 0
	}
	return len(items) - 2
}

// holdsSteps reports whether n contains a plan form below its head.
func holdsSteps(n *rtfs.Node) bool {
	for _, it := range n.Items {
		switch it.Head() {
		case rtfs.FormStep, rtfs.FormStepLoop, rtfs.FormStepParallel, rtfs.FormWithCompensation, "plan", "do":
			return true
		}
		if it.Kind == rtfs.NodeList || it.Kind == rtfs.NodeVector || it.Kind == rtfs.NodeMap {
			if holdsSteps(it) {
				return true
			}
		}
	}
	return false
}
