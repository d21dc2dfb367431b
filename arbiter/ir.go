package arbiter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// IR is a plan as JSON. The model writes it in Mode B (seed 004's schema:
// id, name, capability, args, deps, options per step); Canonicalize derives
// it from any RTFS plan, adding the fields only canonical IR has.
type IR struct {
	Steps []IRStep `json:"steps"`
}

// IRStep is one step. A Mode B step calls exactly one capability.
type IRStep struct {
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	Capability string          `json:"capability,omitempty"` // ":ccos.echo"
	Args       json.RawMessage `json:"args,omitempty"`       // object, or array of positional arguments
	Deps       []string        `json:"deps"`                 // ids of steps that must finish first
	Options    *IROptions      `json:"options,omitempty"`

	// Canonical IR only.
	Kind        string   `json:"kind,omitempty"`        // "loop", "compensation", or "call" (a call outside any step); "" for a plain step
	Parent      string   `json:"parent,omitempty"`      // the step this one is nested in
	Compensates string   `json:"compensates,omitempty"` // kind "compensation": the step it undoes
	Calls       []IRCall `json:"calls,omitempty"`       // every call in the body, when it is not exactly one call
	Body        string   `json:"body,omitempty"`        // the body's canonical RTFS, when it is not exactly one call
}

// IRCall is one capability call inside a step.
type IRCall struct {
	Capability string          `json:"capability"`
	Args       json.RawMessage `json:"args,omitempty"`
}

// IROptions become step metadata.
type IROptions struct {
	Deterministic *bool                      `json:"deterministic,omitempty"`
	Isolation     string                     `json:"isolation,omitempty"` // "inherit" or "isolated"
	Contracts     *IRContracts               `json:"contracts,omitempty"`
	Retry         *IRRetry                   `json:"retry,omitempty"`
	TimeoutMS     int64                      `json:"timeout_ms,omitempty"`
	Idempotency   *IRIdempotency             `json:"idempotency,omitempty"`
	Loop          *IRLoop                    `json:"loop,omitempty"` // canonical IR of a step-loop
	Meta          map[string]json.RawMessage `json:"meta,omitempty"` // any other metadata key
}

// IRContracts are RTFS functions, as source text.
type IRContracts struct {
	Pre  string `json:"pre,omitempty"`  // (fn [ctx] …)
	Post string `json:"post,omitempty"` // (fn [ctx ctx'] …)
}

// IRRetry is ^{:retry {:max n :backoff-ms m}}.
type IRRetry struct {
	Max       int64 `json:"max"`
	BackoffMS int64 `json:"backoff_ms,omitempty"`
}

// IRIdempotency is ^{:idempotency {:key "…" :scope :plan}}.
type IRIdempotency struct {
	Key   string `json:"key"`
	Scope string `json:"scope,omitempty"` // plan | intent | global
}

// IRLoop describes a step-loop in canonical IR.
type IRLoop struct {
	Max   int64  `json:"max"`
	Until string `json:"until,omitempty"`
}

// JSON is the IR as compact JSON (keys of args objects sorted).
func (ir *IR) JSON() string {
	b, err := json.Marshal(ir)
	if err != nil { // every field is plain data or valid raw JSON
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	return string(b)
}

// Indent is the IR as indented JSON.
func (ir *IR) Indent() string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(ir.JSON()), "", "  "); err != nil {
		return ir.JSON()
	}
	return buf.String()
}

// Limits on JSON IR.
const (
	maxIRBytes = 1 << 20
	maxIRSteps = 1000
	maxIRDeps  = 1000
)

// IRError lists what is wrong with an IR document or the plan it compiles to.
type IRError struct{ Diagnostics []Diagnostic }

func (e *IRError) Error() string {
	if len(e.Diagnostics) == 0 {
		return "invalid JSON IR"
	}
	d := e.Diagnostics[0]
	msg := d.Message
	if d.Pos != "" {
		msg = d.Pos + ": " + msg
	}
	if d.Fix != "" {
		msg += "; " + d.Fix
	}
	if n := len(e.Diagnostics) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more problem%s)", n, plural(n))
	}
	return msg
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// irStep is a Mode B step as decoded, before validation.
type irStep struct {
	index      int
	id, name   string
	capability string // without the colon
	args       any    // decoded JSON; nil when absent
	hasArgs    bool
	deps       []string
	options    map[string]any
}

var stepKeys = []string{"id", "name", "capability", "args", "deps", "options"}

// decodeIR reads the Mode B document. Every problem is a diagnostic with
// a JSON path (stage "ir").
func decodeIR(data []byte) ([]*irStep, []Diagnostic) {
	var ds diags
	if len(data) > maxIRBytes {
		ds.add("$", fmt.Sprintf("the JSON is %d bytes, over the %d-byte limit", len(data), maxIRBytes), "write fewer, shorter steps")
		return nil, ds.list
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		ds.add(jsonErrPos(data, err), "not valid JSON: "+jsonErrText(err), `write one JSON object {"steps": […]}`)
		return nil, ds.list
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		ds.add("$", "there is more text after the JSON object", `write one JSON object {"steps": […]} and nothing else`)
		return nil, ds.list
	}
	top, ok := doc.(map[string]any)
	if !ok {
		ds.add("$", "the IR is "+jsonKind(doc)+", not an object", `write one JSON object {"steps": […]}`)
		return nil, ds.list
	}
	for _, k := range sortedKeys(top) {
		if k != "steps" {
			ds.add("$."+k, "unknown key", `the object has only "steps"; remove it`)
		}
	}
	raw, ok := top["steps"]
	arr, isArr := raw.([]any)
	switch {
	case !ok:
		ds.add("$", `there is no "steps" array`, `write {"steps": [{"id": …, "name": …, "capability": …, "args": …, "deps": […]}]}`)
		return nil, ds.list
	case !isArr:
		ds.add("steps", "must be an array of steps, got "+jsonKind(raw), `write "steps": [{…}, …]`)
		return nil, ds.list
	case len(arr) == 0:
		ds.add("steps", "is empty", "write at least one step")
		return nil, ds.list
	case len(arr) > maxIRSteps:
		ds.add("steps", fmt.Sprintf("has %d steps, over the limit of %d", len(arr), maxIRSteps), "use fewer steps")
		return nil, ds.list
	}
	steps := make([]*irStep, 0, len(arr))
	for i, x := range arr {
		if s := decodeStep(&ds, i, x); s != nil {
			steps = append(steps, s)
		}
	}
	return steps, ds.list
}

func decodeStep(ds *diags, i int, x any) *irStep {
	path := fmt.Sprintf("steps[%d]", i)
	obj, ok := x.(map[string]any)
	if !ok {
		ds.add(path, "must be an object, got "+jsonKind(x), `write {"id": …, "name": …, "capability": …, "args": …, "deps": […]}`)
		return nil
	}
	before := len(ds.list)
	s := &irStep{index: i}
	for _, k := range sortedKeys(obj) {
		if !slices.Contains(stepKeys, k) {
			ds.add(path+"."+k, "unknown key", "a step has only id, name, capability, args, deps and options; remove it")
		}
	}
	s.id = stepString(ds, obj, path, "id", true)
	if _, has := obj["id"]; has && s.id == "" && len(ds.list) == before {
		ds.add(path+".id", "is empty", "give every step a short unique id")
	}
	s.name = stepString(ds, obj, path, "name", false)
	s.capability = strings.TrimPrefix(stepString(ds, obj, path, "capability", true), ":")
	if s.name == "" {
		s.name = s.id
	}
	s.args, s.hasArgs = obj["args"]
	if s.args == nil {
		s.hasArgs = false
	}
	if d, ok := obj["deps"]; ok && d != nil {
		s.deps = decodeDeps(ds, path, d)
	}
	if o, ok := obj["options"]; ok && o != nil {
		m, ok := o.(map[string]any)
		if !ok {
			ds.add(path+".options", "must be an object, got "+jsonKind(o), `write "options": {…} or leave it out`)
		}
		s.options = m
	}
	if len(ds.list) > before {
		return nil
	}
	return s
}

// stepString is the string at key of the step obj at path: "" when it is
// missing or null (a problem if required) or not a string (a problem).
func stepString(ds *diags, obj map[string]any, path, key string, required bool) string {
	v, ok := obj[key]
	if !ok || v == nil {
		if required {
			ds.add(path, "has no "+key, fmt.Sprintf("add %q: \"…\"", key))
		}
		return ""
	}
	s, ok := v.(string)
	if !ok {
		ds.add(path+"."+key, "must be a string, got "+jsonKind(v), fmt.Sprintf("write %q: \"…\"", key))
	}
	return s
}

// decodeDeps is the step ids of the deps d of the step at path: each
// entry that is a string, none when d is not an array or has more than
// maxIRDeps entries (each a problem, like an entry not a string).
func decodeDeps(ds *diags, path string, d any) []string {
	arr, ok := d.([]any)
	if !ok {
		ds.add(path+".deps", "must be an array of step ids, got "+jsonKind(d), `write "deps": ["id", …] or "deps": []`)
		return nil
	}
	if len(arr) > maxIRDeps {
		ds.add(path+".deps", fmt.Sprintf("has %d entries, over the limit of %d", len(arr), maxIRDeps), "list each dependency once")
		return nil
	}
	var deps []string
	for j, e := range arr {
		id, ok := e.(string)
		if !ok {
			ds.add(fmt.Sprintf("%s.deps[%d]", path, j), "must be a step id string, got "+jsonKind(e), "write the id of an earlier step")
			continue
		}
		deps = append(deps, id)
	}
	return deps
}

// diags collects diagnostics of one stage.
type diags struct {
	stage string
	list  []Diagnostic
}

func (d *diags) add(pos, msg, fix string) {
	stage := d.stage
	if stage == "" {
		stage = "ir"
	}
	if len(d.list) < maxDiagnostics {
		d.list = append(d.list, Diagnostic{Stage: stage, Pos: pos, Message: msg, Fix: fix})
	}
}

// maxDiagnostics bounds the problems kept for one attempt.
const maxDiagnostics = 50

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func jsonKind(x any) string {
	switch x.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", x)
}

// jsonErrPos turns a decoding error's offset into "line:col" of data.
func jsonErrPos(data []byte, err error) string {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = max(se.Offset-1, 0) // Offset counts the bad byte

	case errors.As(err, &te):
		off = te.Offset
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		off = int64(len(data))
	}
	if off < 0 {
		return "$"
	}
	line, col := lineCol(string(data), int(min(off, int64(len(data)))))
	return fmt.Sprintf("%d:%d", line, col)
}

func jsonErrText(err error) string {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "it ends before the object is closed"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}
