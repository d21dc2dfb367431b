package arbiter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/rtfs"
)

// maxDiffLines bounds a diff.
const maxDiffLines = 100

// DiffIR compares the IR a model wrote with the canonical IR of the plan
// it compiled to (seed 004 "Equivalence & Comparison"): the same multiset
// of steps, deps the plan's order satisfies, compatible args. Steps are
// matched by name and capability, then name, then capability, so renamed
// ids are not differences. Extra ordering the plan adds (a layer waits
// for the whole layer before it) is not a difference either: the plan
// must only never run a step before one it depends on. The result has one
// line per difference, "- " for a step only in the model's IR, "+ " for
// one only in the plan, "~ " for a changed step; "" means equivalent.
func DiffIR(model, plan *IR, reg *capability.Registry) string {
	match := matchSteps(model.Steps, plan.Steps)
	planByID := map[string]int{}
	for i, s := range plan.Steps {
		planByID[s.ID] = i
	}
	modelByID := map[string]int{}
	for i, s := range model.Steps {
		modelByID[s.ID] = i
	}
	matched := make([]bool, len(plan.Steps))
	var lines []string
	add := func(format string, args ...any) {
		if len(lines) < maxDiffLines {
			lines = append(lines, fmt.Sprintf(format, args...))
		}
	}
	for i := range model.Steps {
		m := &model.Steps[i]
		j, ok := match[i]
		if !ok {
			add("- step %s is in the IR but not in the plan", m)
			continue
		}
		matched[j] = true
		p := &plan.Steps[j]
		who := fmt.Sprintf("%q", m.ID)
		if m.Name != p.Name {
			add("~ step %s: named %q in the IR, %q in the plan", who, m.Name, p.Name)
		}
		if trimColon(m.Capability) != trimColon(p.Capability) {
			add("~ step %s: capability %s in the IR, %s in the plan", who, m.Capability, orNone(p.Capability))
		} else if same, err := compatibleArgs(reg, m.Capability, m.Args, p.Args); err != nil {
			add("~ step %s: args cannot be compared: %v", who, err)
		} else if !same {
			add("~ step %s: args %s in the IR, %s in the plan", who, orNone(truncate(compactJSON(m.Args), 200)), orNone(truncate(compactJSON(p.Args), 200)))
		}
		for _, d := range m.Deps {
			k, ok := modelByID[d]
			if !ok {
				continue
			}
			pd, ok := match[k]
			if !ok {
				continue // reported as missing
			}
			if !reaches(plan, planByID, j, plan.Steps[pd].ID) {
				add("~ step %s: depends on %q in the IR, but the plan can run it before %s", who, d, plan.Steps[pd].String())
			}
		}
		if a, b := optionsJSON(m.Options), optionsJSON(p.Options); a != b {
			add("~ step %s: options %s in the IR, %s in the plan", who, orNone(truncate(a, 200)), orNone(truncate(b, 200)))
		}
	}
	for j := range plan.Steps {
		if !matched[j] && plan.Steps[j].Kind != "compensation" {
			add("+ step %s is in the plan but not in the IR", &plan.Steps[j])
		}
	}
	if len(lines) == maxDiffLines {
		lines = append(lines, "… (more differences not shown)")
	}
	return strings.Join(lines, "\n")
}

// matchSteps pairs model steps with plan steps: by name and capability,
// then by name, then by capability, each pass visiting the model's steps in
// the order compilation places them (by dependency layer, declaration order
// within one), so steps that share a name pair with the ones they became.
func matchSteps(model, plan []IRStep) map[int]int {
	out := map[int]int{}
	used := make([]bool, len(plan))
	order := compileOrder(model)
	passes := []func(m, p *IRStep) bool{
		func(m, p *IRStep) bool { return m.Name == p.Name && trimColon(m.Capability) == trimColon(p.Capability) },
		func(m, p *IRStep) bool { return m.Name == p.Name },
		func(m, p *IRStep) bool {
			return m.Capability != "" && trimColon(m.Capability) == trimColon(p.Capability)
		},
	}
	for _, same := range passes {
		for _, i := range order {
			if _, done := out[i]; done {
				continue
			}
			for j := range plan {
				if !used[j] && same(&model[i], &plan[j]) {
					out[i], used[j] = j, true
					break
				}
			}
		}
	}
	return out
}

// compileOrder lists the indexes of steps as layers lays them out: by
// depth in the dependency graph, declaration order within a depth. Unknown
// deps are ignored and a cycle is cut where it is found.
func compileOrder(steps []IRStep) []int {
	byID := make(map[string]int, len(steps))
	for i, s := range steps {
		if _, dup := byID[s.ID]; !dup {
			byID[s.ID] = i
		}
	}
	const visiting = -2
	depth := make([]int, len(steps))
	for i := range depth {
		depth[i] = -1
	}
	var level func(i int) int
	level = func(i int) int {
		switch depth[i] {
		case visiting:
			return -1 // a cycle: this edge does not count
		case -1:
		default:
			return depth[i]
		}
		depth[i] = visiting
		d := 0
		for _, dep := range steps[i].Deps {
			if k, ok := byID[dep]; ok {
				d = max(d, level(k)+1)
			}
		}
		depth[i] = d
		return d
	}
	order := make([]int, len(steps))
	for i := range steps {
		level(i)
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return depth[a] - depth[b] })
	return order
}

// reaches reports whether plan step j transitively depends on id.
func reaches(plan *IR, byID map[string]int, j int, id string) bool {
	seen := map[int]bool{}
	stack := []int{j}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, d := range plan.Steps[k].Deps {
			if d == id {
				return true
			}
			if n, ok := byID[d]; ok && !seen[n] {
				seen[n] = true
				stack = append(stack, n)
			}
		}
		// a nested step also waits for what its parent waits for
		if p := plan.Steps[k].Parent; p != "" {
			if n, ok := byID[p]; ok && !seen[n] {
				seen[n] = true
				stack = append(stack, n)
			}
		}
	}
	return false
}

// compatibleArgs: the same canonical JSON, or, when the capability is
// known and both sides are literal data, the same input once shaped by the
// schema ({:message "hi"} and ["hi"] for ccos.echo). Inputs too large to
// compare are an error, not a difference.
func compatibleArgs(reg *capability.Registry, capID string, a, b json.RawMessage) (bool, error) {
	if compactJSON(a) == compactJSON(b) {
		return true, nil
	}
	cp := reg.Get(trimColon(capID))
	if cp == nil {
		return false, nil
	}
	va, okA := shapedInput(cp.Spec, a)
	vb, okB := shapedInput(cp.Spec, b)
	if !okA || !okB {
		return false, nil
	}
	return rtfs.EqualBounded(va, vb)
}

func shapedInput(spec *capability.Spec, raw json.RawMessage) (rtfs.Value, bool) {
	s := &irStep{}
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&s.args) != nil {
			return rtfs.Nil, false
		}
		s.hasArgs = s.args != nil
	}
	nodes, err := argNodes(s, spec)
	if err != nil {
		return rtfs.Nil, false
	}
	vals := make([]rtfs.Value, len(nodes))
	for i, n := range nodes {
		if !n.IsLiteral() {
			return rtfs.Nil, false
		}
		vals[i] = n.Value()
	}
	v, err := spec.InputFrom(vals)
	return v, err == nil
}

func optionsJSON(o *IROptions) string {
	if o == nil {
		return ""
	}
	c := *o
	c.Loop = nil // canonical-only
	if s := string(marshalJSON(c)); s != "{}" {
		return s
	}
	return ""
}

// compactJSON is raw JSON without insignificant space.
func compactJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

func trimColon(id string) string { return strings.TrimPrefix(id, ":") }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// modelIR is the IR the model wrote, normalised as canonical IR is
// (capability with its colon, args re-encoded from the shaped arguments,
// options from the compiled metadata), so that only real differences show.
func modelIR(steps []*checkedStep) *IR {
	ir := &IR{Steps: make([]IRStep, len(steps))}
	for i, s := range steps {
		deps := s.deps
		if deps == nil {
			deps = []string{}
		}
		ir.Steps[i] = IRStep{ID: s.id, Name: s.name, Capability: ":" + s.spec.ID, Args: argsJSON(s.args), Deps: deps, Options: metaOptions(s.meta)}
	}
	return ir
}
