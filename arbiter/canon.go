package arbiter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/rtfs"
)

// Canonicalize derives the canonical IR of a plan: one entry per step (and
// per call written outside any step), in source order, with
//
//   - id: the step name as a slug, made unique ("run-tests", "run-tests-2");
//   - capability and args: the step's call when its body makes exactly
//     one; calls: every call when it makes several; body: the body's
//     canonical RTFS when it is more than one call;
//   - deps: inferred from order — a step depends on the step before it, or
//     on every branch end of a step-parallel before it; the branches of a
//     step-parallel (and of if/when/cond) share the deps of the form;
//   - options: the step's metadata (contracts, retry, timeout, …);
//   - kind/parent/compensates for loops, nested steps and compensations.
//
// The same plan always gives the same IR, byte for byte.
func Canonicalize(forms []*rtfs.Node) *IR {
	c := &canon{ids: map[string]int{}}
	var deps []string
	for _, f := range forms {
		deps = c.walk(f, deps, -1)
	}
	if c.ir.Steps == nil {
		c.ir.Steps = []IRStep{}
	}
	return &c.ir
}

// CanonicalizeSource reads an RTFS plan and returns its canonical IR.
func CanonicalizeSource(src, file string) (*IR, error) {
	forms, err := rtfs.Read(src, file)
	if err != nil {
		return nil, err
	}
	return Canonicalize(forms), nil
}

type canon struct {
	ir    IR
	ids   map[string]int
	calls [][]*rtfs.Node // per step: the calls its own body makes
}

// walk visits n given the ids the next step depends on and the index of
// the enclosing step (-1 at top level); it returns the new frontier.
func (c *canon) walk(n *rtfs.Node, deps []string, owner int) []string {
	switch n.Kind {
	case rtfs.NodeQuote, rtfs.NodeAtom, rtfs.NodeSymbol:
		return deps
	case rtfs.NodeVector, rtfs.NodeMap:
		return c.seq(n.Items, deps, owner)
	}
	switch head := n.Head(); head {
	case rtfs.FormStep, rtfs.FormStepLoop:
		return []string{c.step(n, deps, owner)}
	case rtfs.FormStepParallel:
		var out []string
		for _, b := range n.Items[1:] {
			out = appendNew(out, c.walk(b, deps, owner)...)
		}
		if out == nil {
			return deps
		}
		return out
	case rtfs.FormWithCompensation:
		if len(n.Items) != 3 {
			return c.seq(n.Items[1:], deps, owner)
		}
		after := c.walk(n.Items[1], deps, owner)
		first := len(c.ir.Steps)
		c.walk(n.Items[2], nil, owner)
		if first < len(c.ir.Steps) && len(after) == 1 {
			undo := &c.ir.Steps[first]
			undo.Kind, undo.Compensates = "compensation", after[0]
		}
		return after
	case "if", "when", "when-not", "cond":
		if len(n.Items) < 2 {
			return deps
		}
		deps = c.walk(n.Items[1], deps, owner)
		var out []string
		for _, b := range n.Items[2:] {
			out = appendNew(out, c.walk(b, deps, owner)...)
		}
		if out == nil {
			return deps
		}
		return out
	case "call":
		if owner < 0 {
			return []string{c.bareCall(n, deps)}
		}
		c.calls[owner] = append(c.calls[owner], n)
		return c.seq(n.Items[2:], deps, owner)
	case "plan":
		return c.seq(n.Items[1:], deps, owner)
	}
	return c.seq(n.Items, deps, owner)
}

func (c *canon) seq(items []*rtfs.Node, deps []string, owner int) []string {
	for _, it := range items {
		deps = c.walk(it, deps, owner)
	}
	return deps
}

func appendNew(dst []string, ids ...string) []string {
	for _, id := range ids {
		if !slices.Contains(dst, id) {
			dst = append(dst, id)
		}
	}
	return dst
}

// step records a step and walks its body; nested steps start from the
// step's own deps and name it as their parent.
func (c *canon) step(n *rtfs.Node, deps []string, owner int) string {
	name := rtfs.StepName(n)
	i := len(c.ir.Steps)
	s := IRStep{ID: c.newID(name, "step"), Name: name, Deps: slices.Clone(deps)}
	if s.Deps == nil {
		s.Deps = []string{}
	}
	if owner >= 0 {
		s.Parent = c.ir.Steps[owner].ID
	}
	var body []*rtfs.Node
	var meta *rtfs.Node
	if n.Head() == rtfs.FormStepLoop {
		s.Kind = "loop"
		if len(n.Items) > 1 {
			meta = n.Items[1].Meta
		}
		if len(n.Items) > 2 {
			if meta == nil {
				meta = n.Items[2].Meta
			}
			s.Options = metaOptions(meta)
			s.Options = withLoop(s.Options, n.Items[2])
			body = n.Items[3:]
		}
	} else {
		meta = rtfs.StepMeta(n)
		s.Options = metaOptions(meta)
		if len(n.Items) > 2 {
			body = n.Items[2:]
		}
	}
	c.ir.Steps = append(c.ir.Steps, s)
	c.calls = append(c.calls, nil)
	c.seq(body, deps, i)
	c.finishStep(i, body, meta)
	return c.ir.Steps[i].ID
}

// finishStep fills in the calls the step's own body makes.
func (c *canon) finishStep(i int, body []*rtfs.Node, meta *rtfs.Node) {
	s := &c.ir.Steps[i]
	calls := c.calls[i]
	if len(calls) == 1 {
		s.Capability = ":" + rtfs.CapabilityID(calls[0])
		s.Args = argsJSON(calls[0].Items[min(2, len(calls[0].Items)):])
	}
	if len(calls) > 1 {
		for _, call := range calls {
			s.Calls = append(s.Calls, IRCall{Capability: ":" + rtfs.CapabilityID(call), Args: argsJSON(call.Items[min(2, len(call.Items)):])})
		}
	}
	plain := len(body) == 1 && len(calls) == 1 && body[0] == calls[0]
	if !plain && len(body) > 0 {
		parts := make([]string, len(body))
		for j, b := range body {
			if j == 0 && meta != nil && b.Meta == meta {
				nm := *b // the step's metadata is in options
				nm.Meta = nil
				b = &nm
			}
			parts[j] = rtfs.PrintNode(b)
		}
		s.Body = strings.Join(parts, " ")
	}
}

// bareCall records a call written outside any step as an entry of its own.
func (c *canon) bareCall(n *rtfs.Node, deps []string) string {
	id := rtfs.CapabilityID(n)
	s := IRStep{ID: c.newID("call "+id, "call"), Kind: "call", Capability: ":" + id,
		Args: argsJSON(n.Items[min(2, len(n.Items)):]), Deps: slices.Clone(deps)}
	if s.Deps == nil {
		s.Deps = []string{}
	}
	c.ir.Steps = append(c.ir.Steps, s)
	c.calls = append(c.calls, nil)
	c.seq(n.Items[min(2, len(n.Items)):], deps, -1)
	return s.ID
}

// newID makes a unique slug of name.
func (c *canon) newID(name, def string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
		if b.Len() >= 48 {
			break
		}
	}
	id := b.String()
	if id == "" {
		id = def
	}
	c.ids[id]++
	if n := c.ids[id]; n > 1 {
		for {
			cand := id + "-" + strconv.Itoa(n)
			if c.ids[cand] == 0 {
				c.ids[cand] = 1
				return cand
			}
			n++
		}
	}
	return id
}

// argsJSON is a call's arguments as canonical JSON: one map with keyword
// keys is an object; anything else an array of positional arguments.
func argsJSON(args []*rtfs.Node) json.RawMessage {
	switch {
	case len(args) == 0:
		return nil
	case len(args) == 1 && args[0].Kind == rtfs.NodeMap && args[0].Meta == nil:
		if obj, ok := keywordObject(args[0]); ok {
			return marshalJSON(obj)
		}
	}
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = nodeJSON(a)
	}
	return marshalJSON(out)
}

// marshalJSON encodes v compactly, without HTML escaping.
func marshalJSON(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // v holds only JSON data
		return json.RawMessage(strconv.Quote(err.Error()))
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// metaOptions reads step metadata into options; keys with their own field
// take it when their value has the documented shape, every other key goes
// to meta.
func metaOptions(meta *rtfs.Node) *IROptions {
	if meta == nil || meta.Kind != rtfs.NodeMap || len(meta.Items) == 0 {
		return nil
	}
	o := &IROptions{}
	for i := 0; i+1 < len(meta.Items); i += 2 {
		k, v := meta.Items[i], meta.Items[i+1]
		key := rtfs.PrintNode(k)
		if k.Kind == rtfs.NodeAtom && k.Val.Kind() == rtfs.KindKeyword {
			key = k.Val.Str()
		}
		if !setOption(o, key, v) {
			if o.Meta == nil {
				o.Meta = map[string]json.RawMessage{}
			}
			o.Meta[key] = marshalJSON(nodeJSON(v))
		}
	}
	return o
}

func setOption(o *IROptions, key string, v *rtfs.Node) bool {
	lit := v.Kind == rtfs.NodeAtom && v.Meta == nil
	switch key {
	case "pre", "post":
		if o.Contracts == nil {
			o.Contracts = &IRContracts{}
		}
		if key == "pre" {
			o.Contracts.Pre = rtfs.PrintNode(v)
		} else {
			o.Contracts.Post = rtfs.PrintNode(v)
		}
		return true
	case "deterministic":
		if lit && v.Val.Kind() == rtfs.KindBool {
			b := v.Val.AsBool()
			o.Deterministic = &b
			return true
		}
	case "isolation":
		if lit && (v.Val.Kind() == rtfs.KindKeyword || v.Val.Kind() == rtfs.KindString) && (v.Val.Str() == "inherit" || v.Val.Str() == "isolated") {
			o.Isolation = v.Val.Str()
			return true
		}
	case "timeout-ms":
		if lit && v.Val.Kind() == rtfs.KindInt && v.Val.AsInt() > 0 {
			o.TimeoutMS = v.Val.AsInt()
			return true
		}
	case "retry":
		m := literalMap(v)
		if mx, ok := m["max"]; ok && mx.Kind() == rtfs.KindInt && mx.AsInt() >= 0 && mx.AsInt() <= 100 && len(m) <= 2 {
			bo, hasBo := m["backoff-ms"]
			if len(m) == 2 && (!hasBo || bo.Kind() != rtfs.KindInt || bo.AsInt() < 0) {
				return false
			}
			o.Retry = &IRRetry{Max: mx.AsInt(), BackoffMS: bo.AsInt()}
			return true
		}
	case "idempotency":
		m := literalMap(v)
		key, ok := m["key"]
		sc, hasSc := m["scope"]
		if ok && key.Kind() == rtfs.KindString && key.Str() != "" && len(m) <= 2 && (len(m) == 1 || hasSc && sc.Kind() == rtfs.KindKeyword &&
			slices.Contains([]string{"plan", "intent", "global"}, sc.Str())) {
			o.Idempotency = &IRIdempotency{Key: key.Str()}
			if hasSc {
				o.Idempotency.Scope = sc.Str()
			}
			return true
		}
	}
	return false
}

// literalMap returns a literal map node with keyword keys as a Go map.
func literalMap(n *rtfs.Node) map[string]rtfs.Value {
	if n.Kind != rtfs.NodeMap || !n.IsLiteral() || n.Meta != nil {
		return nil
	}
	out := map[string]rtfs.Value{}
	for i := 0; i+1 < len(n.Items); i += 2 {
		k := n.Items[i]
		if k.Val.Kind() != rtfs.KindKeyword {
			return nil
		}
		out[k.Val.Str()] = n.Items[i+1].Value()
	}
	return out
}

// withLoop records a step-loop's options map.
func withLoop(o *IROptions, opts *rtfs.Node) *IROptions {
	if opts.Kind != rtfs.NodeMap {
		return o
	}
	l := &IRLoop{}
	for i := 0; i+1 < len(opts.Items); i += 2 {
		k, v := opts.Items[i], opts.Items[i+1]
		switch {
		case k.Kind != rtfs.NodeAtom || k.Val.Kind() != rtfs.KindKeyword:
		case k.Val.Str() == "max" && v.Kind == rtfs.NodeAtom && v.Val.Kind() == rtfs.KindInt:
			l.Max = v.Val.AsInt()
		case k.Val.Str() == "until":
			l.Until = rtfs.PrintNode(v)
		}
	}
	if o == nil {
		o = &IROptions{}
	}
	o.Loop = l
	return o
}

// String renders one step for diffs: its id, name and capability.
func (s *IRStep) String() string {
	out := fmt.Sprintf("%q", s.ID)
	if s.Name != "" && s.Name != s.ID {
		out += fmt.Sprintf(" (%q", s.Name)
		if s.Capability != "" {
			out += ", " + s.Capability
		}
		return out + ")"
	}
	if s.Capability != "" {
		out += " (" + s.Capability + ")"
	}
	return out
}
