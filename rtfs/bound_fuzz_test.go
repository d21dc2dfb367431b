package rtfs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// FuzzBuiltinsOnSharedValues builds values with sharing (doubling vectors,
// lists and maps, nested sets) from a small program, then applies a core
// builtin to a few of them with a small fuel budget. Every call must end
// with a value or an *Error, never a panic, and well within a time budget:
// a walk that is not charged per node would run for hours on these values.
func FuzzBuiltinsOnSharedValues(f *testing.F) {
	names := make([]string, 0, len(coreBuiltins))
	for name := range coreBuiltins {
		names = append(names, name)
	}
	slices.Sort(names)
	for i := range names {
		f.Add(uint8(40), uint16(i), uint8(1), uint8(1), uint8(2))
	}
	f.Add(uint8(62), uint16(0), uint8(2), uint8(3), uint8(7))
	f.Fuzz(func(t *testing.T, depth uint8, which uint16, a0, a1, a2 uint8) {
		d := int(depth % 63)
		src := fmt.Sprintf(`(let [d %d
      v (reduce (fn [v _] (conj v v)) [] (range d))
      w (reduce (fn [v _] (conj v v)) [] (range d))
      l (reduce (fn [l _] (list l l)) '() (range d))
      m (reduce (fn [m _] {:a m :b [m m]}) {} (range d))
      s (reduce (fn [s i] (conj s [i (str i)])) #{} (range 8))]
  [v w l m s [v w] {:v 1 :w 2} "héllo" 3 -1 nil :k inc (fn [& xs] (first xs)) #"(a+)+"])`, d)
		p, err := CompileString(src, Options{File: "fuzz"})
		if err != nil {
			t.Fatal(err)
		}
		pool, err := p.Eval(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		vals := pool.Items()
		b := coreBuiltins[names[int(which)%len(names)]]
		picks := []uint8{a0, a1, a2}
		n := b.Min
		if b.Max < 0 || b.Max > n {
			n = min(b.Min+int(a0%3), max(b.Max, b.Min+2))
		}
		args := make([]Value, n)
		for i := range args {
			args[i] = vals[int(picks[i%3]+uint8(i))%len(vals)]
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Fuel, not the context, must end the call: one that runs into the
		// context's deadline (a hang guard) was not bounded by its fuel.
		_, err = CallFn(ctx, b.value(), args, Limits{Fuel: 20_000, MaxDepth: 32})
		if ctx.Err() != nil {
			t.Fatalf("(%s …) on shared values ran past its context with 20000 fuel: %v", b.Name, err)
		}
		var e *Error
		if err != nil && !errors.As(err, &e) {
			t.Fatalf("(%s …): error %T is not an *Error: %v", b.Name, err, err)
		}
	})
}
