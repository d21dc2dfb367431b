package stop

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ralphloop/ralph/rtfs"
)

// PredicateLimits bound one predicate evaluation. A predicate runs after
// every action, so its budget is far below a plan's.
var PredicateLimits = rtfs.Limits{Fuel: 100_000, MaxDepth: 64}

// Predicate is a validated completion predicate (seed 000, DESIGN §7). One
// written in the JSON DSL keeps its parsed form in JSON and is evaluated as
// the RTFS it translates to, so both forms share one evaluator.
type Predicate struct {
	Source string         // the RTFS that is evaluated
	File   string         // where it was written, for error positions
	JSON   *PredicateExpr // the JSON form, when it was written in JSON
}

// ParsePredicate reads src as the JSON DSL when it starts with '{' and as
// RTFS otherwise.
func ParsePredicate(src, file string) (*Predicate, error) {
	if strings.HasPrefix(strings.TrimSpace(src), "{") {
		return ParsePredicateJSON([]byte(src), file)
	}
	return ParsePredicateRTFS(src, file)
}

// ParsePredicateRTFS validates an RTFS predicate: it must read and compile
// as a pure program with the audit.* builtins.
func ParsePredicateRTFS(src, file string) (*Predicate, error) {
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("predicate is empty; write an RTFS expression such as (audit.succeeded? \"shell.exec\")")
	}
	p := &Predicate{Source: src, File: file}
	if _, err := p.Bind(NewIndex()); err != nil {
		return nil, err
	}
	return p, nil
}

// ParsePredicateJSON validates a predicate in the JSON DSL, including the
// RTFS inside any "rtfs" variant.
func ParsePredicateJSON(data []byte, file string) (*Predicate, error) {
	e, err := UnmarshalPredicateJSON(data)
	if err != nil {
		return nil, err
	}
	if err := e.checkRTFS(file); err != nil {
		return nil, err
	}
	p := &Predicate{Source: e.RTFS(), File: file, JSON: e}
	if _, err := p.Bind(NewIndex()); err != nil {
		return nil, err
	}
	return p, nil
}

// Bound is a predicate compiled against one run's audit index.
type Bound struct {
	ix   *Index
	prog *rtfs.Program
}

// Bind compiles p against ix: the audit.* builtins of the result read ix.
func (p *Predicate) Bind(ix *Index) (*Bound, error) {
	prog, err := rtfs.CompileString(p.Source, rtfs.Options{File: p.File, Env: auditEnv(ix), Limits: PredicateLimits})
	if err != nil {
		return nil, err
	}
	return &Bound{ix: ix, prog: prog}, nil
}

// Eval evaluates the predicate against the index's current state. Any value
// but nil and false holds. It does not allocate for predicates built from
// the audit.* queries, and, or, not and comparisons.
func (b *Bound) Eval(ctx context.Context) (bool, error) {
	b.ix.mu.RLock()
	v, err := b.prog.Eval(ctx)
	b.ix.mu.RUnlock()
	if err != nil {
		return false, err
	}
	return v.Truthy(), nil
}

// Explain evaluates like Eval and also returns every audit query the
// predicate made, in order, with the action that answered it.
func (b *Bound) Explain(ctx context.Context) (bool, []Evidence, error) {
	var trace []Evidence
	b.ix.mu.Lock() // exclusive: the trace is written by the builtins
	b.ix.trace = &trace
	v, err := b.prog.Eval(ctx)
	b.ix.trace = nil
	b.ix.mu.Unlock()
	if err != nil {
		return false, trace, err
	}
	return v.Truthy(), trace, nil
}

// auditEnv returns the core library plus the audit.* builtins bound to ix.
// They must be called with ix's lock held (Bound.Eval does).
func auditEnv(ix *Index) *rtfs.Env {
	env := rtfs.NewEnv()
	bools := func(name string, n int, f func(args []rtfs.Value) bool) *rtfs.Builtin {
		return &rtfs.Builtin{Name: name, Min: n, Max: n, Fn: func(_ *rtfs.Machine, args []rtfs.Value) (rtfs.Value, error) {
			if err := textArgs(name, args); err != nil {
				return rtfs.Nil, err
			}
			return rtfs.Bool(f(args)), nil
		}}
	}
	builtins := []*rtfs.Builtin{
		bools("audit.succeeded?", 1, func(a []rtfs.Value) bool { return ix.succeeded(a[0].Str()) }),
		bools("audit.failed?", 1, func(a []rtfs.Value) bool { return ix.failed(a[0].Str()) }),
		bools("audit.before?", 2, func(a []rtfs.Value) bool { return ix.before(a[0].Str(), a[1].Str()) }),
		{Name: "audit.metadata?", Min: 3, Max: 3, Fn: func(_ *rtfs.Machine, a []rtfs.Value) (rtfs.Value, error) {
			if err := textArgs("audit.metadata?", a[:2]); err != nil {
				return rtfs.Nil, err
			}
			return rtfs.Bool(ix.metadata(a[0].Str(), a[1].Str(), metaText(a[2]))), nil
		}},
		{Name: "audit.count", Min: 1, Max: 2, Fn: func(_ *rtfs.Machine, a []rtfs.Value) (rtfs.Value, error) {
			status := "any"
			if len(a) == 2 {
				if err := textArgs("audit.count", a[1:]); err != nil {
					return rtfs.Nil, err
				}
				status = a[1].Str()
			}
			if err := textArgs("audit.count", a[:1]); err != nil {
				return rtfs.Nil, err
			}
			n, ok := ix.count(a[0].Str(), status)
			if !ok {
				return rtfs.Nil, &rtfs.Error{Type: rtfs.ErrValue, Msg: fmt.Sprintf("audit.count status must be :succeeded, :failed or :any, got %s", rtfs.Print(a[1]))}
			}
			return rtfs.Int(n), nil
		}},
		{Name: "audit.last-result", Min: 1, Max: 1, Fn: func(_ *rtfs.Machine, a []rtfs.Value) (rtfs.Value, error) {
			if err := textArgs("audit.last-result", a); err != nil {
				return rtfs.Nil, err
			}
			return ix.lastResultOf(a[0].Str()), nil
		}},
		{Name: "audit.iteration", Min: 0, Max: 0, Fn: func(*rtfs.Machine, []rtfs.Value) (rtfs.Value, error) {
			return rtfs.Int(ix.iteration), nil
		}},
		{Name: "audit.cost", Min: 0, Max: 0, Fn: func(*rtfs.Machine, []rtfs.Value) (rtfs.Value, error) {
			return rtfs.Float(ix.cost), nil
		}},
	}
	for _, b := range builtins {
		if err := env.Register(b); err != nil {
			panic(err) // the names above are fixed and valid; failing here is a programming error
		}
	}
	return env
}

// textArgs checks that every argument is a string or keyword.
func textArgs(name string, args []rtfs.Value) error {
	for i, a := range args {
		if k := a.Kind(); k != rtfs.KindString && k != rtfs.KindKeyword {
			return &rtfs.Error{Type: rtfs.ErrType, Msg: fmt.Sprintf("%s argument %d must be a string, got %s", name, i+1, rtfs.Print(a))}
		}
	}
	return nil
}
