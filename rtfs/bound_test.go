package rtfs

import (
	"context"
	"strings"
	"testing"
	"time"
)

// doubling defines v and w: two equal vectors of 2^40 nodes each, built by
// doubling, that share structure within themselves but not with each other.
const doubling = `(def v (reduce (fn [v _] (conj v v)) [] (range 40)))
(def w (reduce (fn [v _] (conj v v)) [] (range 40)))
`

// Each program of the bounded-evaluation issue ends quickly, either with
// the right value or with an error that names the bound and the position;
// none walks the 2^40 nodes or answers a wrong result.
func TestBoundedOperationsOnSharedValues(t *testing.T) {
	t.Parallel()
	const fuel = "<b>:3:%s: evaluation ran out of fuel (limit 10000000 steps); simplify the program or raise the fuel limit"
	const keyErr = "<b>:3:1: a map key or set member must print in at most 65536 bytes; [[] [[]] [[] [[]]] [[] [[]] [[] [[]]]] [[] [[]] [[] [[]]] [[… is larger: key by something smaller, such as an id"
	cases := []struct{ src, want, wantErr string }{
		{src: `(+ 1 v)`, wantErr: "<b>:3:1: + expects a number, got vector [[] [[]] [[] [[]]] [[] [[]] [[] [[]]]] […"},
		{src: `(throw v)`, wantErr: "<b>:3:1: thrown: [[] [[]] [[] [[]]] [[] [[]] [[] [[]]]] [[] [[]] [[] [[]]] [[] [[]] [[] [[]]]]] […"},
		{src: `(try (+ 1 v) (catch e :caught))`, want: ":caught"},
		{src: `(try (+ 1 v) (catch e (count (:message e))))`, want: "72"},
		{src: `(hash-map v 1)`, wantErr: keyErr},
		{src: `{v 1}`, wantErr: keyErr},
		{src: `#{v}`, wantErr: keyErr},
		{src: `(set [v])`, wantErr: keyErr},
		{src: `(frequencies [v])`, wantErr: keyErr},
		{src: `(assoc {} v 1)`, wantErr: keyErr},
		{src: `(count (sort [v v]))`, want: "2"},
		{src: `(count (sort [v w]))`, wantErr: strings.Replace(fuel, "%s", "8", 1)},
		{src: `(compare v w)`, wantErr: strings.Replace(fuel, "%s", "1", 1)},
		{src: `(= v v)`, want: "true"},
		{src: `(= v w)`, wantErr: strings.Replace(fuel, "%s", "1", 1)},
		{src: `(not= v w)`, wantErr: strings.Replace(fuel, "%s", "1", 1)},
		{src: `(distinct [v w])`, wantErr: strings.Replace(fuel, "%s", "1", 1)},
		{src: `(str v)`, wantErr: strings.Replace(fuel, "%s", "1", 1)},
		{src: `(count (sort-by identity [v w]))`, wantErr: strings.Replace(fuel, "%s", "8", 1)},
		{src: `(= [1 [2 {:a #{3}}]] '(1 (2 {:a #{3}})))`, want: "true"},
		{src: `(distinct [[1 2] [1 2] {:a 1} {:a 1}])`, want: "[[1 2] {:a 1}]"},
	}
	for _, tc := range cases {
		t.Run(tc.src, func(t *testing.T) {
			t.Parallel()
			p, err := CompileString(doubling+tc.src, Options{File: "<b>"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // guards a hang; nothing is timed
			defer cancel()
			v, err := p.Eval(ctx)
			switch {
			case tc.wantErr != "":
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("got %s, %v\nwant error %s", PrintLimit(v, 100), err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("error %v, want %s", err, tc.want)
			case Print(v) != tc.want:
				t.Errorf("= %s, want %s", Print(v), tc.want)
			}
		})
	}
}

// Cancelling the context ends a walk over shared values promptly, however
// much fuel is left.
func TestWalksPollCancellation(t *testing.T) {
	t.Parallel()
	for _, src := range []string{`(= v w)`, `(count (sort [v w]))`, `(compare v w)`, `(distinct [v w])`} {
		t.Run(src, func(t *testing.T) {
			t.Parallel()
			p, err := CompileString(doubling+src, Options{File: "<b>"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				_, err := p.EvalWith(ctx, Limits{Fuel: 1 << 62})
				done <- err
			}()
			cancel()
			if err := <-done; err == nil || !strings.Contains(err.Error(), "evaluation cancelled") {
				t.Errorf("got %v, want a cancellation", err)
			}
		})
	}
}

func TestPrintLimit(t *testing.T) {
	t.Parallel()
	v := Int(0)
	for range 64 {
		v = Vector([]Value{v, v})
	}
	if got := PrintLimit(v, 20); got != "[[[[[[[[[[[[[[[[[[[[…" {
		t.Errorf("PrintLimit of 2^64 nodes = %q", got)
	}
	for _, tc := range []struct {
		v    Value
		n    int
		want string
	}{
		{String("héllo"), 3, `"h…`},
		{String("héllo"), 20, `"héllo"`},
		{MapValue(NewMap(Keyword("a"), Vector([]Value{Int(1), Int(2)}))), 100, "{:a [1 2]}"},
		{MapValue(NewMap(Keyword("a"), Vector([]Value{Int(1), Int(2)}))), 6, "{:a [1…"},
	} {
		if got := PrintLimit(tc.v, tc.n); got != tc.want {
			t.Errorf("PrintLimit(%s, %d) = %q, want %q", Print(tc.v), tc.n, got, tc.want)
		}
	}
}
