package bench

import (
	"context"
	"testing"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
	"github.com/ralphloop/ralph/rtfs"
)

// auditIndex is the same map index both evaluators query: per function
// name, how many actions succeeded and failed.
type auditIndex map[string]struct{ ok, failed int }

func (ix auditIndex) succeeded(name string) bool { return ix[name].ok > 0 }
func (ix auditIndex) failed(name string) bool    { return ix[name].failed > 0 }

func newIndex() auditIndex {
	return auditIndex{
		"ccos.chat.send":      {ok: 3},
		"github.create_issue": {ok: 1},
		"shell.exec":          {ok: 10, failed: 2},
	}
}

func BenchmarkPredicate(b *testing.B) {
	ix := newIndex()
	b.Run("rtfs", func(b *testing.B) {
		env := rtfs.NewEnv()
		must(b, env.Register(&rtfs.Builtin{Name: "audit.succeeded?", Min: 1, Max: 1,
			Fn: func(_ *rtfs.Machine, a []rtfs.Value) (rtfs.Value, error) {
				return rtfs.Bool(ix.succeeded(a[0].Str())), nil
			}}))
		must(b, env.Register(&rtfs.Builtin{Name: "audit.failed?", Min: 1, Max: 1,
			Fn: func(_ *rtfs.Machine, a []rtfs.Value) (rtfs.Value, error) {
				return rtfs.Bool(ix.failed(a[0].Str())), nil
			}}))
		p, err := rtfs.CompileString(`(and (audit.succeeded? "ccos.chat.send") (not (audit.failed? "github.create_issue")))`,
			rtfs.Options{File: "predicate", Env: env})
		must(b, err)
		ctx := context.Background()
		v, err := p.Eval(ctx)
		if err != nil || !v.Truthy() {
			b.Fatalf("predicate = %s, %v; want true", rtfs.Print(v), err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if v, _ := p.Eval(ctx); !v.Truthy() {
				b.Fatal("predicate turned false")
			}
		}
	})
	b.Run("expr", func(b *testing.B) {
		program, err := expr.Compile(`succeeded("ccos.chat.send") && !failed("github.create_issue")`,
			expr.Function("succeeded", func(p ...any) (any, error) { return ix.succeeded(p[0].(string)), nil }, new(func(string) bool)),
			expr.Function("failed", func(p ...any) (any, error) { return ix.failed(p[0].(string)), nil }, new(func(string) bool)),
			expr.AsBool())
		must(b, err)
		var machine vm.VM
		out, err := machine.Run(program, nil)
		if err != nil || out != true {
			b.Fatalf("expr predicate = %v, %v; want true", out, err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if out, _ := machine.Run(program, nil); out != true {
				b.Fatal("predicate turned false")
			}
		}
	})
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
