package arbiter

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/governance"
	"github.com/ralphloop/ralph/rtfs"
)

// Reader limits for model-written plans.
const (
	planMaxDepth   = 128
	planMaxLiteral = 64 << 10
	planFile       = "plan"
)

// Check stages, in the order they run.
var stageOrder = []string{"extract", "parse", "forms", "capability", "schema", "governance", "ir"}

// problem is one finding of a check, positioned in the checked text.
type problem struct {
	stage string
	pos   rtfs.Pos // zero when the problem has no position
	msg   string
	fix   string
}

// checker runs the deterministic checks on plan text.
type checker struct {
	reg *capability.Registry
	gov *governance.Kernel
}

// check parses src and runs every check in order: parse, allowed forms,
// capability ids, arity and types against the schemas, then governance
// admission (only when the others pass, as it repeats them less helpfully).
func (c *checker) check(src string) ([]*rtfs.Node, []problem) {
	forms, err := rtfs.ReadWith(src, rtfs.ReadOptions{File: planFile, MaxDepth: planMaxDepth, MaxLiteral: planMaxLiteral})
	if err != nil {
		var re *rtfs.Error
		if errors.As(err, &re) {
			msg, fix := splitFix(re.Msg, "fix it and write the whole plan again")
			return nil, []problem{{stage: "parse", pos: re.Pos, msg: msg, fix: fix}}
		}
		return nil, []problem{{stage: "parse", msg: err.Error(), fix: "write the whole plan again"}}
	}
	w := &formWalker{c: c}
	w.top(forms)
	ps := w.problems
	if len(ps) > 0 {
		slices.SortStableFunc(ps, func(a, b problem) int {
			return slices.Index(stageOrder, a.stage) - slices.Index(stageOrder, b.stage)
		})
		return forms, ps
	}
	return forms, c.admit(forms)
}

// splitFix splits "what went wrong; what to do" messages.
func splitFix(msg, def string) (string, string) {
	if i := strings.Index(msg, "; "); i > 0 {
		return msg[:i], msg[i+2:]
	}
	return msg, def
}

// forbidden forms: definitions escape the step structure of a plan.
var forbidden = map[string]string{
	"def":     "bind values with (let [name value] …) inside the step that needs them",
	"defn":    "write the logic inline, or bind a function with (let [f (fn [x] …)] …)",
	"declare": "bind functions that call each other with (letfn [(f [x] …) (g [y] …)] …)",
}

// formWalker checks allowed forms, capability ids and arguments.
type formWalker struct {
	c        *checker
	problems []problem
	steps    int // step and step-loop forms seen
}

func (w *formWalker) add(stage string, pos rtfs.Pos, msg, fix string) {
	if len(w.problems) < maxDiagnostics {
		w.problems = append(w.problems, problem{stage, pos, msg, fix})
	}
}

func (w *formWalker) top(forms []*rtfs.Node) {
	switch {
	case len(forms) == 0:
		w.add("forms", rtfs.Pos{}, "the plan is empty", `write one (do (step "Name" (call …)) …) form`)
		return
	case len(forms) > 1:
		w.add("forms", forms[1].Pos, fmt.Sprintf("the plan has %d top-level forms", len(forms)), "put every step inside the one (do …) form")
	}
	if h := forms[0].Head(); h != "do" && h != "plan" {
		w.add("forms", forms[0].Pos, "the plan must be one (do …) or (plan …) form, not "+describeNode(forms[0]), `wrap the steps: (do (step "Name" …) …)`)
	}
	for _, f := range forms {
		w.walk(f, 0)
	}
	if w.steps == 0 {
		w.add("forms", forms[0].Pos, "the plan has no step", `write at least one (step "Name" …)`)
	}
}

// walk visits n; steps counts the step forms around it.
func (w *formWalker) walk(n *rtfs.Node, steps int) {
	if n.Meta != nil {
		w.walk(n.Meta, steps)
	}
	if n.Kind == rtfs.NodeQuote {
		return
	}
	head := n.Head()
	if fix, bad := forbidden[head]; bad {
		w.add("forms", n.Pos, head+" is not allowed in a plan", fix)
		return
	}
	switch head {
	case rtfs.FormStep, rtfs.FormStepLoop:
		if rtfs.StepName(n) == "" {
			w.add("forms", n.Pos, head+" needs a literal name", fmt.Sprintf(`write (%s "Name" …)`, head))
		}
		steps++
		w.steps++
	case "call":
		w.call(n, steps)
	}
	for _, it := range n.Items {
		w.walk(it, steps)
	}
}

func (w *formWalker) call(n *rtfs.Node, steps int) {
	if steps == 0 {
		w.add("forms", n.Pos, "call is outside any step", `wrap it: (step "Name" (call …))`)
	}
	if len(n.Items) < 2 {
		w.add("forms", n.Pos, "call has no capability id", "write (call :cap.id args…)")
		return
	}
	idNode := n.Items[1]
	if idNode.Kind != rtfs.NodeAtom || idNode.Val.Kind() != rtfs.KindKeyword {
		fix := "write the id as a keyword, such as :ccos.echo"
		if idNode.Kind == rtfs.NodeAtom && idNode.Val.Kind() == rtfs.KindString {
			fix = "write :" + idNode.Val.Str() + " instead of the string"
		}
		w.add("forms", idNode.Pos, "the capability id must be a literal keyword, not "+describeNode(idNode), fix)
		return
	}
	id := idNode.Val.Str()
	cp := w.c.reg.Get(id)
	if cp == nil {
		w.add("capability", idNode.Pos, "unknown capability :"+id, suggestCapability(id, w.c.reg, w.c.gov.Permits))
		return
	}
	for _, p := range checkArgs(cp.Spec, n.Items[2:]) {
		pos := p.pos
		if pos.Line == 0 {
			pos = n.Pos
		}
		w.add("schema", pos, p.msg, p.fix)
	}
}

func describeNode(n *rtfs.Node) string {
	switch n.Kind {
	case rtfs.NodeSymbol:
		return "the symbol " + n.Val.Str()
	case rtfs.NodeList:
		if h := n.Head(); h != "" {
			return "a (" + h + " …) form"
		}
		return "a list"
	case rtfs.NodeVector:
		return "a vector"
	case rtfs.NodeMap:
		return "a map"
	}
	return "the " + n.Val.Kind().String() + " " + truncate(rtfs.Print(n.Val), 40)
}

// checkArgs checks call arguments against the capability's input schema.
// Literal arguments are checked in full (as the call would be); others
// as far as their syntax shows: arity, map keys, literal field values.
func checkArgs(spec *capability.Spec, args []*rtfs.Node) []problem {
	ps := argProblems(spec, args)
	if len(ps) > 0 {
		fix := "pass " + schemaText(spec) + exampleText(spec)
		for i := range ps {
			if ps[i].fix == "" {
				ps[i].fix = fix
			}
		}
	}
	return ps
}

// argProblems does checkArgs' work; problems without a fix get the
// schema and example as theirs.
func argProblems(spec *capability.Spec, args []*rtfs.Node) []problem {
	in := spec.Input
	if in == nil {
		return nil
	}
	if in.IsMap() && len(args) == 1 && args[0].Kind == rtfs.NodeMap {
		return checkMapNode(spec, in.Fields(), args[0])
	}
	arity := func(want string) []problem {
		return []problem{{stage: "schema", msg: fmt.Sprintf("%s takes %s, got %d argument%s", spec.ID, want, len(args), plural(len(args)))}}
	}
	one := len(args) == 1 && !args[0].IsLiteral() // may compute the whole input at run time
	switch {
	case in.IsMap():
		if fields := in.Fields(); len(args) > len(fields) {
			return arity(fmt.Sprintf("one map or at most %d positional arguments", len(fields)))
		}
	case in.Kind() == "tuple":
		if n := len(in.Elems()); len(args) != n && !one {
			return arity(fmt.Sprintf("%d arguments", n))
		}
	case len(args) != 1 && in.Kind() != "vector" && in.Kind() != "any":
		return arity("one argument")
	}
	literal := true
	for _, a := range args {
		literal = literal && a.IsLiteral()
	}
	if literal {
		vals := make([]rtfs.Value, len(args))
		for i, a := range args {
			vals[i] = a.Value()
		}
		if _, err := spec.InputFrom(vals); err != nil {
			return []problem{{stage: "schema", pos: typeErrorPos(err, args), msg: err.Error()}}
		}
		return nil
	}
	if one {
		return nil
	}
	var ps []problem
	switch {
	case in.IsMap():
		fields := in.Fields()
		for i, a := range args {
			ps = append(ps, checkLiteral(spec, fields[i].Type, a, rtfs.Print(fields[i].Key))...)
		}
	case in.Kind() == "tuple":
		for i, a := range args {
			ps = append(ps, checkLiteral(spec, in.Elems()[i], a, fmt.Sprintf("argument %d", i+1))...)
		}
	}
	return ps
}

func checkLiteral(spec *capability.Spec, t *rtfs.Type, a *rtfs.Node, what string) []problem {
	if !a.IsLiteral() {
		return nil
	}
	if err := t.Check(a.Value()); err != nil {
		return []problem{{stage: "schema", pos: a.Pos, msg: fmt.Sprintf("%s: %s %v", spec.ID, what, err)}}
	}
	return nil
}

// checkMapNode checks a map argument whose values are not all literal.
func checkMapNode(spec *capability.Spec, fields []rtfs.Field, m *rtfs.Node) []problem {
	var ps []problem
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Items); i += 2 {
		k, v := m.Items[i], m.Items[i+1]
		var field *rtfs.Field
		for j := range fields {
			if k.Kind == rtfs.NodeAtom && rtfs.Equal(fields[j].Key, k.Val) {
				field = &fields[j]
			}
		}
		if field == nil {
			var keyFix string // empty: checkArgs gives the schema and example
			if k.Kind == rtfs.NodeAtom && k.Val.Kind() == rtfs.KindString {
				for _, f := range fields {
					if f.Key.Kind() == rtfs.KindKeyword && f.Key.Str() == k.Val.Str() {
						keyFix = "map keys are keywords: write :" + f.Key.Str()
					}
				}
			}
			ps = append(ps, problem{stage: "schema", pos: k.Pos, msg: fmt.Sprintf("%s: %s is not a known key", spec.ID, truncate(rtfs.PrintNode(k), 40)), fix: keyFix})
			continue
		}
		seen[rtfs.Print(field.Key)] = true
		ps = append(ps, checkLiteral(spec, field.Type, v, rtfs.Print(field.Key))...)
	}
	for _, f := range fields {
		if !f.Optional && !seen[rtfs.Print(f.Key)] {
			ps = append(ps, problem{stage: "schema", pos: m.Pos, msg: fmt.Sprintf("%s: %s is required", spec.ID, rtfs.Print(f.Key))})
		}
	}
	return ps
}

// typeErrorPos finds the argument node a type error is about: the map
// key or value it names, or the positional argument [i].
func typeErrorPos(err error, args []*rtfs.Node) rtfs.Pos {
	if len(args) == 0 {
		return rtfs.Pos{}
	}
	var te *rtfs.TypeError
	if !errors.As(err, &te) || len(te.Path) == 0 {
		return args[0].Pos
	}
	if len(args) == 1 && args[0].Kind == rtfs.NodeMap {
		m := args[0]
		for i := 0; i+1 < len(m.Items); i += 2 {
			if rtfs.PrintNode(m.Items[i]) == te.Path[0] {
				if te.Want == "no such key" {
					return m.Items[i].Pos
				}
				return m.Items[i+1].Pos
			}
		}
		return m.Pos
	}
	var i int
	if _, err := fmt.Sscanf(te.Path[0], "[%d]", &i); err == nil && len(args) > 1 && i >= 0 && i < len(args) {
		return args[i].Pos
	}
	return args[0].Pos
}

// schemaText renders an input schema compactly, as the prompt shows it:
// {:cmd string :args [string]?}.
func schemaText(spec *capability.Spec) string {
	if spec.Input == nil {
		return "any"
	}
	return typeText(spec.Input)
}

func typeText(t *rtfs.Type) string {
	el := t.Elems()
	switch t.Kind() {
	case "vector":
		return "[" + typeText(el[0]) + "]"
	case "tuple":
		parts := make([]string, len(el))
		for i, e := range el {
			parts[i] = typeText(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case "map":
		if !t.IsMap() {
			return "map"
		}
		var parts []string
		for _, f := range t.Fields() {
			s := rtfs.Print(f.Key) + " " + typeText(f.Type)
			if f.Optional {
				s += "?"
			}
			parts = append(parts, s)
		}
		return "{" + strings.Join(parts, " ") + "}"
	case "map-of":
		return "{" + typeText(el[0]) + " " + typeText(el[1]) + "}"
	case "maybe":
		return typeText(el[0]) + "?"
	case "or", "and":
		parts := make([]string, len(el))
		for i, e := range el {
			parts[i] = typeText(e)
		}
		sep := "|"
		if t.Kind() == "and" {
			sep = "&"
		}
		return strings.Join(parts, sep)
	case "enum", "=":
		vals := t.Value().Items()[1:]
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = rtfs.Print(v)
		}
		return strings.Join(parts, "|")
	}
	return t.Kind()
}

func exampleText(spec *capability.Spec) string {
	if len(spec.Examples) == 0 {
		return ""
	}
	return ", e.g. " + spec.Examples[0]
}

// suggestCapability names the closest registered ids that permits allows
// (nil: every one), as the prompt's inventory lists them.
func suggestCapability(id string, reg *capability.Registry, permits func(string) bool) string {
	var specs []*capability.Spec
	for _, s := range reg.Specs() {
		if permits == nil || permits(s.ID) {
			specs = append(specs, s)
		}
	}
	if len(specs) == 0 {
		return "no capability is available: the plan cannot call any"
	}
	best, bestD, bestRaw := "", 1<<30, 1<<30
	var all []string
	ns := id[:max(strings.LastIndexByte(id, '.'), 0)]
	for _, s := range specs {
		all = append(all, ":"+s.ID)
		raw := editDistance(id, s.ID)
		d := raw
		dot := strings.LastIndexByte(s.ID, '.')
		if last := s.ID[dot+1:]; strings.HasSuffix(id, "."+last) || id == last {
			d = min(d, 2) // ccos.echo for echo or util.echo
		}
		if ns != "" && dot > 0 && s.ID[:dot] == ns {
			d = min(d, 1) // the same namespace first: shell.exec, not agent.run, for shell.run
		}
		if d < bestD || d == bestD && raw < bestRaw {
			best, bestD, bestRaw = s.ID, d, raw
		}
	}
	list := strings.Join(all[:min(len(all), 12)], " ")
	if len(all) > 12 {
		list += " …"
	}
	if bestD <= max(2, len(id)/3) {
		return fmt.Sprintf("did you mean :%s? use only listed capabilities: %s", best, list)
	}
	return "use only listed capabilities: " + list
}

// suggestID names the closest step id, as a suffix for a fix.
func suggestID(id string, steps []*irStep) string {
	best, bestD := "", 1<<30
	for _, s := range steps {
		if d := editDistance(id, s.id); d < bestD {
			best, bestD = s.id, d
		}
	}
	if best != "" && bestD <= max(1, len(id)/3) {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}

// editDistance is the Levenshtein distance, on at most 64 bytes of each.
func editDistance(a, b string) int {
	a, b = a[:min(len(a), 64)], b[:min(len(b), 64)]
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// reasonRE splits a governance reason: "plan:3:5: text (rule gov.x)".
var reasonRE = regexp.MustCompile(`^(?:` + planFile + `:(\d+):(\d+): )?(.*?)(?: \(rule ([a-z.-]+)\))?$`)

// admit runs governance admission and turns refusals into problems with
// fixes the model can act on (the constitution is the user's; the model
// can only change its plan).
func (c *checker) admit(forms []*rtfs.Node) []problem {
	d := c.gov.Admit(planFile, forms)
	if d.Allowed {
		return nil
	}
	var ps []problem
	for _, r := range d.Reasons {
		m := reasonRE.FindStringSubmatch(r)
		var pos rtfs.Pos
		msg, rule := r, ""
		if m != nil {
			pos.Line, _ = strconv.Atoi(m[1])
			pos.Col, _ = strconv.Atoi(m[2])
			msg, rule = m[3], m[4]
		}
		// A compile error names its own position: "plan:3:5: message".
		if pos.Line == 0 {
			if mm := reasonRE.FindStringSubmatch(msg); mm != nil && mm[1] != "" {
				pos.Line, _ = strconv.Atoi(mm[1])
				pos.Col, _ = strconv.Atoi(mm[2])
				msg = mm[3]
			}
		}
		msg, own := splitFix(msg, "")
		fix := c.governanceFix(rule)
		if (rule == "" || rule == governance.RuleCompiles) && own != "" { // a compile error that says how to fix itself
			fix = own
		}
		ps = append(ps, problem{stage: "governance", pos: pos, msg: msg, fix: fix})
		if len(ps) >= maxDiagnostics {
			break
		}
	}
	return ps
}

func (c *checker) governanceFix(rule string) string {
	con := c.gov.Constitution()
	switch rule {
	case governance.RuleAllow, governance.RuleDeny, governance.RuleKnownCapability:
		return "remove this call; use only the capabilities listed in the prompt"
	case governance.RuleShellAllow:
		if len(con.ShellAllow) == 0 {
			return "remove this call: no command may run through :shell.exec here"
		}
		return "run only these commands through :shell.exec: " + strings.Join(con.ShellAllow, ", ")
	case governance.RuleRequireContracts:
		return `give the step a contract: (step "Name" ^{:pre (fn [ctx] …)} …)`
	case governance.RuleRequireCompensate:
		return `make it the first step of (step.with-compensation (step "Do" …) (step "Undo" …))`
	case governance.RuleContractPurity:
		return "contracts must be pure: no call or step forms inside :pre or :post"
	case governance.RuleMaxSteps:
		return fmt.Sprintf("use at most %d steps (a step-loop counts its :max)", con.MaxSteps)
	case governance.RuleArguments:
		return "pass arguments that match the capability's input schema"
	case governance.RuleLiteralCapability:
		return "write the capability id as a literal keyword, such as :ccos.echo"
	}
	return "use only the forms and builtins the rules list"
}
