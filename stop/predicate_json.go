package stop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/rtfs"
)

// The JSON DSL of seed 000. Each predicate is an object with exactly one
// key, the variant:
//
//	{"action_succeeded": {"function_name": "shell.exec"}}
//	{"action_failed": {"function_name": "github.create_issue"}}
//	{"action_metadata_matches": {"function_name": "shell.exec", "key": "exit", "value": "0"}}
//	{"and": [P, P, ...]}      at least one
//	{"or": [P, P, ...]}       at least one
//	{"not": P}
//	{"rtfs": "(audit.succeeded? \"x\")"}
//
// Unknown variants, unknown or missing fields, duplicate keys, values of the
// wrong type and trailing data are errors that name the JSON path.

// Predicate variants.
const (
	OpSucceeded = "action_succeeded"
	OpFailed    = "action_failed"
	OpMetadata  = "action_metadata_matches"
	OpAnd       = "and"
	OpOr        = "or"
	OpNot       = "not"
	OpRTFS      = "rtfs"
)

// PredicateExpr is one node of a JSON predicate.
type PredicateExpr struct {
	Op           string
	FunctionName string           // action_succeeded, action_failed, action_metadata_matches
	Key, Value   string           // action_metadata_matches
	Args         []*PredicateExpr // and, or (≥ 1), not (exactly 1)
	Code         string           // rtfs
}

// UnmarshalPredicateJSON parses the JSON DSL strictly.
func UnmarshalPredicateJSON(data []byte) (*PredicateExpr, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	p := &jsonParser{d: d}
	e, err := p.expr("$", 0)
	if err != nil {
		return nil, fmt.Errorf("predicate JSON: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("predicate JSON: unexpected data after the predicate")
	}
	return e, nil
}

// MarshalJSON writes the canonical JSON form: the fields of each variant in
// the order documented above, no insignificant spaces.
func (e *PredicateExpr) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	e.write(&b)
	return b.Bytes(), nil
}

func (e *PredicateExpr) write(b *bytes.Buffer) {
	q := func(s string) {
		out, _ := json.Marshal(s) // marshalling a string cannot fail
		b.Write(out)
	}
	b.WriteString(`{"` + e.Op + `":`)
	switch e.Op {
	case OpSucceeded, OpFailed:
		b.WriteString(`{"function_name":`)
		q(e.FunctionName)
		b.WriteString(`}`)
	case OpMetadata:
		b.WriteString(`{"function_name":`)
		q(e.FunctionName)
		b.WriteString(`,"key":`)
		q(e.Key)
		b.WriteString(`,"value":`)
		q(e.Value)
		b.WriteString(`}`)
	case OpAnd, OpOr:
		b.WriteByte('[')
		for i, a := range e.Args {
			if i > 0 {
				b.WriteByte(',')
			}
			a.write(b)
		}
		b.WriteByte(']')
	case OpNot:
		e.Args[0].write(b)
	case OpRTFS:
		q(e.Code)
	}
	b.WriteByte('}')
}

// RTFS translates the predicate to the RTFS the evaluator runs.
func (e *PredicateExpr) RTFS() string {
	var b strings.Builder
	e.rtfs(&b)
	return b.String()
}

func (e *PredicateExpr) rtfs(b *strings.Builder) {
	s := func(v string) string { return rtfs.Print(rtfs.String(v)) }
	switch e.Op {
	case OpSucceeded:
		b.WriteString("(audit.succeeded? " + s(e.FunctionName) + ")")
	case OpFailed:
		b.WriteString("(audit.failed? " + s(e.FunctionName) + ")")
	case OpMetadata:
		b.WriteString("(audit.metadata? " + s(e.FunctionName) + " " + s(e.Key) + " " + s(e.Value) + ")")
	case OpAnd, OpOr, OpNot:
		b.WriteString("(" + e.Op)
		for _, a := range e.Args {
			b.WriteByte(' ')
			a.rtfs(b)
		}
		b.WriteString(")")
	case OpRTFS:
		// Each fragment was compiled on its own first (checkRTFS), so
		// wrapping it cannot change what it means; the newline ends a
		// trailing comment.
		b.WriteString("(do " + e.Code + "\n)")
	}
}

// checkRTFS compiles every rtfs fragment on its own, so an error names the
// fragment's own line and column.
func (e *PredicateExpr) checkRTFS(file string) error {
	switch e.Op {
	case OpRTFS:
		_, err := ParsePredicateRTFS(e.Code, file)
		return err
	case OpAnd, OpOr, OpNot:
		for _, a := range e.Args {
			if err := a.checkRTFS(file); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxPredicateDepth bounds nesting so hostile input cannot exhaust the stack.
const maxPredicateDepth = 64

type jsonParser struct{ d *json.Decoder }

func (p *jsonParser) token(path string) (json.Token, error) {
	t, err := p.d.Token()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: unexpected end of input", path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return t, nil
}

func (p *jsonParser) delim(path string, want json.Delim, what string) error {
	t, err := p.token(path)
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return fmt.Errorf("%s: want %s, got %s", path, what, describeToken(t))
	}
	return nil
}

func (p *jsonParser) str(path string) (string, error) {
	t, err := p.token(path)
	if err != nil {
		return "", err
	}
	s, ok := t.(string)
	if !ok {
		return "", fmt.Errorf("%s: want a string, got %s", path, describeToken(t))
	}
	return s, nil
}

func (p *jsonParser) expr(path string, depth int) (*PredicateExpr, error) {
	if depth > maxPredicateDepth {
		return nil, fmt.Errorf("%s: predicate nests deeper than %d", path, maxPredicateDepth)
	}
	if err := p.delim(path, '{', `an object such as {"action_succeeded": {"function_name": "..."}}`); err != nil {
		return nil, err
	}
	t, err := p.token(path)
	if err != nil {
		return nil, err
	}
	op, ok := t.(string)
	if !ok {
		return nil, fmt.Errorf("%s: an empty object is not a predicate; use one of %s", path, variantList)
	}
	sub := path + "." + op
	e := &PredicateExpr{Op: op}
	switch op {
	case OpSucceeded, OpFailed:
		err = p.fields(sub, map[string]*string{"function_name": &e.FunctionName})
	case OpMetadata:
		err = p.fields(sub, map[string]*string{"function_name": &e.FunctionName, "key": &e.Key, "value": &e.Value})
	case OpAnd, OpOr:
		e.Args, err = p.list(sub, depth)
	case OpNot:
		var a *PredicateExpr
		if a, err = p.expr(sub, depth+1); err == nil {
			e.Args = []*PredicateExpr{a}
		}
	case OpRTFS:
		e.Code, err = p.str(sub)
	default:
		return nil, fmt.Errorf("%s: unknown predicate variant %q; use one of %s", path, op, variantList)
	}
	if err != nil {
		return nil, err
	}
	t, err = p.token(path)
	if err != nil {
		return nil, err
	}
	if d, ok := t.(json.Delim); !ok || d != '}' {
		return nil, fmt.Errorf("%s: a predicate object has exactly one key, %q, but %s follows it", path, op, describeToken(t))
	}
	return e, nil
}

const variantList = "action_succeeded, action_failed, action_metadata_matches, and, or, not, rtfs"

// fields reads an object whose keys are exactly those of want, each a string.
func (p *jsonParser) fields(path string, want map[string]*string) error {
	if err := p.delim(path, '{', "an object"); err != nil {
		return err
	}
	seen := map[string]bool{}
	for p.d.More() {
		k, err := p.str(path)
		if err != nil {
			return err
		}
		dst, ok := want[k]
		switch {
		case !ok:
			return fmt.Errorf("%s: unknown field %q; the fields are %s", path, k, fieldList(want))
		case seen[k]:
			return fmt.Errorf("%s: field %q appears twice", path, k)
		}
		seen[k] = true
		if *dst, err = p.str(path + "." + k); err != nil {
			return err
		}
	}
	if _, err := p.token(path); err != nil { // the closing '}'
		return err
	}
	for k := range want {
		if !seen[k] {
			return fmt.Errorf("%s: missing field %q", path, k)
		}
	}
	if s := *want["function_name"]; s == "" {
		return fmt.Errorf("%s: function_name is empty", path)
	}
	return nil
}

func fieldList(want map[string]*string) string {
	if len(want) == 1 {
		return `"function_name"`
	}
	return `"function_name", "key" and "value"`
}

func (p *jsonParser) list(path string, depth int) ([]*PredicateExpr, error) {
	if err := p.delim(path, '[', "an array of predicates"); err != nil {
		return nil, err
	}
	var out []*PredicateExpr
	for p.d.More() {
		e, err := p.expr(path+"["+strconv.Itoa(len(out))+"]", depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if _, err := p.token(path); err != nil { // the closing ']'
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: needs at least one predicate", path)
	}
	return out, nil
}

func describeToken(t json.Token) string {
	switch v := t.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(v))
	case string:
		return strconv.Quote(v)
	case nil:
		return "null"
	case json.Number:
		return "the number " + v.String()
	case bool:
		return strconv.FormatBool(v)
	}
	return fmt.Sprint(t)
}
