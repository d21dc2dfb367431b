package rtfs

import (
	"context"
	"fmt"
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

// Looking a value up — a map or set called as a function, get, get-in,
// update-in, select-keys, contains?, a case table — hashes and compares
// it, so it is charged like any other walk: with a small budget each
// lookup of a 2^40-node value ends in the fuel error at its position.
func TestLookupsChargeFuel(t *testing.T) {
	t.Parallel()
	const fuel = "<b>:3:%d: evaluation ran out of fuel (limit 100000 steps); simplify the program or raise the fuel limit"
	cases := []struct {
		src     string
		col     int
		want    string
		wantErr bool
	}{
		{src: `({:a 1} v)`, col: 1, wantErr: true},
		{src: `({:a 1} v :none)`, col: 1, wantErr: true},
		{src: `(#{1} v)`, col: 1, wantErr: true},
		{src: `(let [s #{1 2}] (s v))`, col: 17, wantErr: true},
		{src: `(get {:a 1} v)`, col: 1, wantErr: true},
		{src: `(get #{1} v)`, col: 1, wantErr: true},
		{src: `(get-in {:a {:b 1}} [:a v])`, col: 1, wantErr: true},
		{src: `(update-in {:a 1} [v] identity)`, col: 1, wantErr: true},
		{src: `(select-keys {:a 1} [:a v])`, col: 1, wantErr: true},
		{src: `(contains? #{1} v)`, col: 1, wantErr: true},
		{src: `(contains? {:a 1} v)`, col: 1, wantErr: true},
		{src: `(case v 1 :one [1] :vec :other)`, col: 1, wantErr: true},
		{src: `(partition-by identity [v w])`, col: 1, wantErr: true},
		{src: `(filter #{1} [v])`, col: 1, wantErr: true},
		// Looking a small key up in a large value, or matching against a
		// literal, visits no more than the key or the literal.
		{src: `(:a v)`, want: "nil"},
		{src: `(get v 0)`, want: "[]"},
		{src: `(count (v 39))`, want: "39"},
		{src: `(match v [] :empty [x] :one _ :other)`, want: ":other"},
		{src: `(match [v 2] [_ 1] :one [_ 2] :two _ :other)`, want: ":two"},
		{src: `(case 2 1 :one 2 :two :other)`, want: ":two"},
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
			v, err := p.EvalWith(ctx, Limits{Fuel: 100000})
			switch {
			case tc.wantErr:
				want := fmt.Sprintf(fuel, tc.col)
				if err == nil || err.Error() != want {
					t.Errorf("got %s, %v\nwant error %s", PrintLimit(v, 100), err, want)
				}
			case err != nil:
				t.Errorf("error %v, want %s", err, tc.want)
			case Print(v) != tc.want:
				t.Errorf("= %s, want %s", Print(v), tc.want)
			}
		})
	}
}

// Lookups poll cancellation like the other walks.
func TestLookupsPollCancellation(t *testing.T) {
	t.Parallel()
	for _, src := range []string{`({:a 1} v)`, `(case v 1 :one :other)`, `(contains? #{1} v)`} {
		t.Run(src, func(t *testing.T) {
			t.Parallel()
			p, err := CompileString(doubling+src, Options{File: "<b>"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if _, err := p.EvalWith(ctx, Limits{Fuel: 1 << 62}); err == nil || !strings.Contains(err.Error(), "evaluation cancelled") {
				t.Errorf("got %v, want a cancellation", err)
			}
		})
	}
}

// doubled returns a vector of 2^n+1 - 1 nodes built by doubling, sharing
// storage with nothing built by another call.
func doubled(n int) Value {
	v := Vector(nil)
	for range n {
		v = Vector([]Value{v, v})
	}
	return v
}

// Past MaxCompareNodes, Equal answers false and EqualBounded fails naming
// the bound; below it both are exact.
func TestEqualBounded(t *testing.T) {
	t.Parallel()
	small, small2 := doubled(10), doubled(10)
	if eq, err := EqualBounded(small, small2); !eq || err != nil {
		t.Errorf("EqualBounded of equal small values = %v, %v", eq, err)
	}
	if eq, err := EqualBounded(small, doubled(9)); eq || err != nil {
		t.Errorf("EqualBounded of unequal small values = %v, %v", eq, err)
	}
	// Each of these visits 2^24 nodes before failing.
	t.Run("values", func(t *testing.T) {
		t.Parallel()
		big, big2 := doubled(24), doubled(24)
		eq, err := EqualBounded(big, big2)
		want := "<input>: values too large to compare: [[[[[[[[[[[[[[[[[[[[[[[[[] []] [[] []]] … and [[[[[[[[[[[[[[[[[[[[[[[[[] []] [[] []]] … have more than 16777216 nodes to visit; compare something smaller, such as an id or a hash"
		if eq || err == nil || err.Error() != want {
			t.Errorf("EqualBounded of two 2^25-node values = %v, %v\nwant error %s", eq, err, want)
		}
		if eq, err := EqualBounded(big, big); !eq || err != nil {
			t.Errorf("EqualBounded of a value with itself = %v, %v", eq, err)
		}
	})
	// A map whose key is itself too large: the look-up of the key counts.
	t.Run("map keys", func(t *testing.T) {
		t.Parallel()
		m1 := MapValue(NewMap(doubled(24), Int(1)))
		m2 := MapValue(NewMap(doubled(24), Int(1)))
		if eq, err := EqualBounded(m1, m2); eq || err == nil || !strings.Contains(err.Error(), "values too large to compare") {
			t.Errorf("EqualBounded of maps keyed by large values = %v, %v, want an error", eq, err)
		}
	})
}
