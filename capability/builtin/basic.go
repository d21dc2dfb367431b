package builtin

import (
	"context"
	"errors"
	"math"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/rtfs"
)

func echoRow() row {
	return row{
		spec: &capability.Spec{
			ID: "ccos.echo", Version: "1.0.0",
			Description: "Return the message unchanged.",
			Input:       rtfs.MustParseType("[:map [:message :string]]"),
			Output:      rtfs.MustParseType(":string"),
			Risk:        capability.RiskLow,
			Examples:    []string{`(call :ccos.echo {:message "hello"})`},
		},
		handler: func(*host) capability.Handler { return echo },
	}
}

func echo(_ context.Context, in rtfs.Value) (capability.Result, error) {
	return capability.Result{Value: in.AsMap().GetKey("message")}, nil
}

var errDivZero = errors.New("ccos.math.div: division by zero")

func mathOp(name, desc string, intOp func(a, b int64) (int64, bool), fop func(a, b float64) float64) row {
	id := "ccos.math." + name
	run := func(_ context.Context, in rtfs.Value) (capability.Result, error) {
		a, b := in.Items()[0], in.Items()[1]
		if name == "div" && b.AsFloat() == 0 {
			return capability.Result{}, errDivZero
		}
		if a.Kind() == rtfs.KindInt && b.Kind() == rtfs.KindInt && intOp != nil {
			if r, ok := intOp(a.AsInt(), b.AsInt()); ok {
				return capability.Result{Value: rtfs.Int(r)}, nil
			}
			if name != "div" {
				return capability.Result{}, errors.New(id + ": integer overflow")
			}
		}
		r := fop(a.AsFloat(), b.AsFloat())
		if math.IsInf(r, 0) || math.IsNaN(r) {
			return capability.Result{}, errors.New(id + ": result is not a finite number")
		}
		return capability.Result{Value: rtfs.Float(r)}, nil
	}
	return row{
		spec: &capability.Spec{
			ID: id, Version: "1.0.0", Description: desc,
			Input:    rtfs.MustParseType("[:tuple :number :number]"),
			Output:   rtfs.MustParseType(":number"),
			Risk:     capability.RiskLow,
			Examples: []string{"(call :" + id + " 6 3)"},
		},
		handler: func(*host) capability.Handler { return run },
	}
}

func mathRows() []row {
	return []row{
		mathOp("add", "Add two numbers.", func(a, b int64) (int64, bool) {
			s := a + b
			return s, (s > a) == (b > 0)
		}, func(a, b float64) float64 { return a + b }),
		mathOp("sub", "Subtract the second number from the first.", func(a, b int64) (int64, bool) {
			s := a - b
			return s, (s < a) == (b > 0)
		}, func(a, b float64) float64 { return a - b }),
		mathOp("mul", "Multiply two numbers.", func(a, b int64) (int64, bool) {
			if a == 0 || b == 0 {
				return 0, true
			}
			r := a * b
			return r, r/b == a && !(a == -1 && b == math.MinInt64) && !(b == -1 && a == math.MinInt64)
		}, func(a, b float64) float64 { return a * b }),
		mathOp("div", "Divide the first number by the second (int when exact).", func(a, b int64) (int64, bool) {
			if b == -1 && a == math.MinInt64 {
				return 0, false
			}
			return a / b, a%b == 0
		}, func(a, b float64) float64 { return a / b }),
	}
}
