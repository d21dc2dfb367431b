package arbiter

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/rtfs"
)

// checkedStep is a Mode B step that passed validation: its capability,
// its arguments as RTFS syntax and its metadata.
type checkedStep struct {
	*irStep
	spec   *capability.Spec
	args   []*rtfs.Node
	meta   *rtfs.Node // nil when the step has no options
	depIdx []int
}

// validateIR checks decoded steps against the registry: unique ids,
// existing deps, no cycles (named), known capabilities, args that match
// the schema, valid options. It returns the steps in topological layers.
// An unknown capability's fix suggests only ids permits allows (nil: any).
func validateIR(steps []*irStep, reg *capability.Registry, permits func(string) bool) ([]*checkedStep, [][]int, []Diagnostic) {
	ds := &diags{stage: "ir"}
	byID := make(map[string]int, len(steps))
	out := make([]*checkedStep, len(steps))
	for i, s := range steps {
		out[i] = &checkedStep{irStep: s}
		if j, dup := byID[s.id]; dup {
			ds.add(fmt.Sprintf("steps[%d].id", s.index), fmt.Sprintf("id %q is already used by steps[%d]", s.id, steps[j].index), "give every step its own id")
			continue
		}
		byID[s.id] = i
	}
	for i, s := range steps {
		c := out[i]
		path := fmt.Sprintf("steps[%d]", s.index)
		for j, d := range s.deps {
			dp := fmt.Sprintf("%s.deps[%d]", path, j)
			k, ok := byID[d]
			switch {
			case !ok:
				ds.add(dp, fmt.Sprintf("no step has id %q", d), "list only ids of steps in this plan"+suggestID(d, steps))
			case d == s.id:
				ds.add(dp, fmt.Sprintf("step %q depends on itself", d), "remove it from its own deps")
			case slices.Contains(c.depIdx, k):
				ds.add(dp, fmt.Sprintf("%q is listed twice", d), "list each dependency once")
			default:
				c.depIdx = append(c.depIdx, k)
			}
		}
		cp := reg.Get(s.capability)
		if cp == nil {
			ds.add(path+".capability", fmt.Sprintf("unknown capability :%s", s.capability), suggestCapability(s.capability, reg, permits))
			continue
		}
		c.spec = cp.Spec
		args, err := argNodes(s, cp.Spec)
		if err != nil {
			ds.add(path+".args", err.Error(), "write args as the input schema says: "+schemaText(cp.Spec))
			continue
		}
		c.args = args
		for _, p := range checkArgs(cp.Spec, args) {
			ds.add(path+".args", p.msg, p.fix)
		}
		c.meta = optionsMeta(s.options, path+".options", ds)
	}
	if cyc := findCycle(out); cyc != nil {
		names := make([]string, len(cyc))
		for i, k := range cyc {
			names[i] = out[k].id
		}
		last := out[cyc[len(cyc)-2]]
		ds.add(fmt.Sprintf("steps[%d].deps", last.index), "the deps form a cycle: "+strings.Join(names, " → "),
			fmt.Sprintf("remove %q from the deps of %q, or another edge of the cycle", names[len(names)-1], last.id))
	}
	if len(ds.list) > 0 {
		return nil, nil, ds.list
	}
	return out, layers(out), nil
}

// argNodes turns a step's JSON args into call arguments, shaped by the
// schema: an object is one map argument, an array is positional
// arguments, a scalar is one argument.
func argNodes(s *irStep, spec *capability.Spec) ([]*rtfs.Node, error) {
	if !s.hasArgs {
		return nil, nil
	}
	in := spec.Input
	var fields []rtfs.Field
	if in != nil && in.IsMap() {
		fields = in.Fields()
	}
	posType := func(i, n int) *rtfs.Type {
		switch {
		case in == nil:
			return nil
		case fields != nil:
			if i < len(fields) {
				return fields[i].Type
			}
			return nil
		case in.Kind() == "tuple":
			return elemType(in, i)
		case n == 1:
			return in
		}
		return elemType(in, i)
	}
	switch v := s.args.(type) {
	case map[string]any:
		n, err := jsonNode(v, in, "args", 0)
		if err != nil {
			return nil, err
		}
		return []*rtfs.Node{n}, nil
	case []any:
		out := make([]*rtfs.Node, len(v))
		for i, x := range v {
			t := posType(i, len(v))
			if _, obj := x.(map[string]any); obj && len(v) == 1 && fields != nil {
				t = in // [{…}]: the one map argument
			}
			n, err := jsonNode(x, t, fmt.Sprintf("args[%d]", i), 0)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	}
	n, err := jsonNode(s.args, posType(0, 1), "args", 0)
	if err != nil {
		return nil, err
	}
	return []*rtfs.Node{n}, nil
}

// findCycle returns a dependency cycle as step indexes, first repeated at
// the end (a → b → a), or nil. Steps are visited in declaration order, so
// the cycle reported is the same on every run.
func findCycle(steps []*checkedStep) []int {
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(steps))
	var stack []int
	var visit func(i int) []int
	visit = func(i int) []int {
		color[i] = grey
		stack = append(stack, i)
		for _, d := range steps[i].depIdx {
			switch color[d] {
			case grey:
				at := slices.Index(stack, d)
				return append(slices.Clone(stack[at:]), d)
			case white:
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
		return nil
	}
	for i := range steps {
		if color[i] == white {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// layers groups acyclic steps by depth: a step's layer is one more than its
// deepest dependency's. Within a layer steps keep declaration order, so the
// sort is stable.
func layers(steps []*checkedStep) [][]int {
	depth := make([]int, len(steps))
	for i := range depth {
		depth[i] = -1
	}
	var level func(i int) int
	level = func(i int) int {
		if depth[i] >= 0 {
			return depth[i]
		}
		d := 0
		for _, p := range steps[i].depIdx {
			d = max(d, level(p)+1)
		}
		depth[i] = d
		return d
	}
	var out [][]int
	for i := range steps {
		d := level(i)
		for len(out) <= d {
			out = append(out, nil)
		}
		out[d] = append(out[d], i)
	}
	return out
}

// compileSteps builds the RTFS plan: one form per layer, a single step or
// a step-parallel of the layer's steps.
func compileSteps(steps []*checkedStep, ls [][]int) *rtfs.Node {
	do := list(symbol("do"))
	for _, layer := range ls {
		if len(layer) == 1 {
			do.Items = append(do.Items, stepNode(steps[layer[0]]))
			continue
		}
		par := list(symbol(rtfs.FormStepParallel))
		for _, i := range layer {
			par.Items = append(par.Items, stepNode(steps[i]))
		}
		do.Items = append(do.Items, par)
	}
	return do
}

func stepNode(s *checkedStep) *rtfs.Node {
	call := list(append([]*rtfs.Node{symbol("call"), atom(rtfs.Keyword(s.spec.ID))}, s.args...)...)
	call.Meta = s.meta
	return list(symbol(rtfs.FormStep), atom(rtfs.String(s.name)), call)
}

// optionsMeta validates a step's options and returns its metadata map
// node, or nil when there are none.
func optionsMeta(opts map[string]any, path string, ds *diags) *rtfs.Node {
	if len(opts) == 0 {
		return nil
	}
	meta := &rtfs.Node{Kind: rtfs.NodeMap}
	set := setter(func(key string, v *rtfs.Node) { meta.Items = append(meta.Items, atom(rtfs.Keyword(key)), v) })
	for _, k := range sortedKeys(opts) {
		v, p := opts[k], path+"."+k
		switch k {
		case "deterministic":
			b, ok := v.(bool)
			if !ok {
				ds.add(p, "must be true or false, got "+jsonKind(v), `write "deterministic": true`)
				continue
			}
			set("deterministic", atom(rtfs.Bool(b)))
		case "isolation":
			s, _ := v.(string)
			if s != "inherit" && s != "isolated" {
				ds.add(p, "must be \"inherit\" or \"isolated\"", `write "isolation": "inherit"`)
				continue
			}
			set("isolation", atom(rtfs.Keyword(s)))
		case "contracts":
			contractsMeta(v, p, ds, set)
		case "retry":
			retryMeta(v, p, ds, set)
		case "timeout_ms":
			n, ok := jsonInt(v)
			if !ok || n <= 0 {
				ds.add(p, "must be a positive whole number of milliseconds", `write "timeout_ms": 60000`)
				continue
			}
			set("timeout-ms", atom(rtfs.Int(n)))
		case "idempotency":
			idempotencyMeta(v, p, ds, set)
		case "meta":
			extraMeta(v, p, ds, set)
		default:
			ds.add(p, "unknown option", "options are deterministic, isolation, contracts, retry, timeout_ms, idempotency and meta; remove it")
		}
	}
	if len(meta.Items) == 0 {
		return nil
	}
	return meta
}

// setter adds one metadata key.
type setter func(key string, v *rtfs.Node)

func retryMeta(v any, p string, ds *diags, set setter) {
	m, _ := v.(map[string]any)
	mx, okMax := jsonInt(m["max"])
	bo, okBo := jsonInt(m["backoff_ms"])
	if m["backoff_ms"] == nil {
		okBo = true
	}
	if !onlyKeys(m, "max", "backoff_ms") || !okMax || mx < 0 || mx > 100 || !okBo || bo < 0 {
		ds.add(p, "must be {\"max\": n, \"backoff_ms\": m} with 0 ≤ n ≤ 100 and m ≥ 0", `write "retry": {"max": 2, "backoff_ms": 500}`)
		return
	}
	r := &rtfs.Node{Kind: rtfs.NodeMap, Items: []*rtfs.Node{atom(rtfs.Keyword("max")), atom(rtfs.Int(mx))}}
	if bo > 0 {
		r.Items = append(r.Items, atom(rtfs.Keyword("backoff-ms")), atom(rtfs.Int(bo)))
	}
	set("retry", r)
}

func idempotencyMeta(v any, p string, ds *diags, set setter) {
	m, _ := v.(map[string]any)
	key, _ := m["key"].(string)
	scope, hasScope := m["scope"].(string)
	if !onlyKeys(m, "key", "scope") || key == "" || m["scope"] != nil && !slices.Contains([]string{"plan", "intent", "global"}, scope) {
		ds.add(p, `must be {"key": "…", "scope": "plan"|"intent"|"global"}`, `write "idempotency": {"key": "deploy-v2", "scope": "intent"}`)
		return
	}
	idem := &rtfs.Node{Kind: rtfs.NodeMap, Items: []*rtfs.Node{atom(rtfs.Keyword("key")), atom(rtfs.String(key))}}
	if hasScope {
		idem.Items = append(idem.Items, atom(rtfs.Keyword("scope")), atom(rtfs.Keyword(scope)))
	}
	set("idempotency", idem)
}

// extraMeta passes any other metadata keys through (canonical IR writes
// them under options.meta).
func extraMeta(v any, p string, ds *diags, set setter) {
	m, ok := v.(map[string]any)
	if !ok {
		ds.add(p, "must be an object of metadata keys and values", `write "meta": {"owner": "ci"}`)
		return
	}
	for _, mk := range sortedKeys(m) {
		key, _, err := keywordKey(mk, p+"."+mk, nil)
		if err == nil && slices.Contains([]string{"pre", "post", "retry", "timeout-ms", "idempotency", "deterministic", "isolation"}, key.Str()) {
			err = fmt.Errorf("%s.%s: %s has its own option; set it there", p, mk, mk)
		}
		var n *rtfs.Node
		if err == nil {
			n, err = jsonNode(m[mk], nil, p+"."+mk, 0)
		}
		if err != nil {
			ds.add(p+"."+mk, strings.TrimPrefix(err.Error(), p+"."+mk+": "), "fix the value or remove the key")
			continue
		}
		set(key.Str(), n)
	}
}

func contractsMeta(v any, p string, ds *diags, set setter) {
	m, ok := v.(map[string]any)
	if !ok {
		ds.add(p, "must be an object with \"pre\" and/or \"post\"", `write "contracts": {"pre": "(fn [ctx] …)"}`)
		return
	}
	for _, k := range sortedKeys(m) {
		src, ok := m[k].(string)
		if (k != "pre" && k != "post") || !ok {
			ds.add(p+"."+k, "contracts are \"pre\" and \"post\", each an RTFS function as a string", `write "pre": "(fn [ctx] (string? (:path ctx)))"`)
			continue
		}
		forms, err := rtfs.ReadWith(src, rtfs.ReadOptions{MaxDepth: maxJSONDepth, MaxLiteral: maxResponseBytes})
		switch {
		case err != nil:
			ds.add(p+"."+k, "does not read as RTFS: "+rtfsMessage(err), "write one (fn [ctx] …) form")
		case len(forms) != 1 || forms[0].Head() != "fn":
			ds.add(p+"."+k, "must be one (fn …) form", `write "(fn [ctx] …)" for pre, "(fn [ctx ctx2] …)" for post`)
		default:
			set(k, forms[0])
		}
	}
}

// onlyKeys reports whether m is an object whose keys are all in keys.
func onlyKeys(m map[string]any, keys ...string) bool {
	if m == nil {
		return false
	}
	for k := range m {
		if !slices.Contains(keys, k) {
			return false
		}
	}
	return true
}

func jsonInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

// CompileIR validates Mode B JSON IR against the registry and compiles it
// to a formatted RTFS plan. The error is an *IRError listing every problem
// with its JSON path.
func CompileIR(data []byte, reg *capability.Registry) (string, error) {
	steps, ds := decodeIR(data)
	if len(ds) > 0 {
		return "", &IRError{Diagnostics: ds}
	}
	checked, ls, ds := validateIR(steps, reg, nil)
	if len(ds) > 0 {
		return "", &IRError{Diagnostics: ds}
	}
	return FormatPlan([]*rtfs.Node{compileSteps(checked, ls)}), nil
}
