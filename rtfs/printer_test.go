package rtfs

import (
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// genValue builds a random value without functions, depth-bounded.
func genValue(r *rand.Rand, depth int) Value {
	n := 10
	if depth <= 0 {
		n = 7
	}
	switch r.IntN(n) {
	case 0:
		return Nil
	case 1:
		return Bool(r.IntN(2) == 0)
	case 2:
		switch r.IntN(4) {
		case 0:
			return Int(math.MinInt64 + int64(r.IntN(3)))
		case 1:
			return Int(math.MaxInt64 - int64(r.IntN(3)))
		}
		return Int(r.Int64N(2000) - 1000)
	case 3:
		switch r.IntN(5) {
		case 0:
			return Float(math.Float64frombits(r.Uint64()&^(0x7ff<<52)) * float64(r.IntN(3)-1)) // subnormals
		case 1:
			return Float(r.NormFloat64() * math.Pow(10, float64(r.IntN(600)-300)))
		case 2:
			return Float(math.Inf(r.IntN(2)*2 - 1))
		}
		return Float(float64(r.IntN(100)) / 8)
	case 4:
		return String(genString(r))
	case 5:
		return Keyword(genName(r))
	case 6:
		if r.IntN(3) == 0 {
			return Regex(regexp.MustCompile([]string{`\d+`, `a"b`, `^x\.y$`, `[\\/]`, `(a|b)*`}[r.IntN(5)]))
		}
		return Symbol(genName(r))
	case 7, 8:
		items := make([]Value, r.IntN(4))
		for i := range items {
			items[i] = genValue(r, depth-1)
		}
		if r.IntN(2) == 0 {
			return List(items)
		}
		return Vector(items)
	default:
		if r.IntN(3) == 0 {
			items := make([]Value, r.IntN(4))
			for i := range items {
				items[i] = genValue(r, depth-1)
			}
			return SetValue(NewSet(items...))
		}
		b := NewMapBuilder(3)
		for range r.IntN(4) {
			b.Set(genValue(r, depth-1), genValue(r, depth-1))
		}
		return MapValue(b.Map())
	}
}

func genString(r *rand.Rand) string {
	var sb strings.Builder
	for range r.IntN(8) {
		switch r.IntN(6) {
		case 0:
			sb.WriteByte(byte(r.IntN(0x20))) // control characters
		case 1:
			sb.WriteByte(byte(0x80 + r.IntN(0x80))) // stray bytes: invalid UTF-8
		case 2:
			sb.WriteString([]string{`"`, `\`, "é", "日本", "\u2028", "😀", "\x7f"}[r.IntN(7)])
		default:
			sb.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	return sb.String()
}

func genName(r *rand.Rand) string {
	const first = "abcxyzAQ*!?<>=_-+."
	const rest = "abcxyz0123456789*!?<>=_-+.'&%$#|"
	var sb strings.Builder
	for {
		sb.Reset()
		sb.WriteByte(first[r.IntN(len(first))])
		for range r.IntN(6) {
			sb.WriteByte(rest[r.IntN(len(rest))])
		}
		if r.IntN(4) == 0 {
			sb.WriteString("/b")
		}
		s := sb.String()
		if s == "nil" || s == "true" || s == "false" || ((s[0] == '+' || s[0] == '-') && len(s) > 1 && s[1] >= '0' && s[1] <= '9') {
			continue
		}
		return s
	}
}

func TestPrintReadRoundTrip(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		v := genValue(r, 4)
		text := Print(v)
		back, err := ReadValue(text)
		if err != nil {
			t.Fatalf("case %d: Read(Print(v)) failed for %q: %v", i, text, err)
		}
		if !Equal(v, back) {
			t.Fatalf("case %d: round trip changed the value:\n printed %q\n reread  %q", i, text, Print(back))
		}
		if again := Print(back); again != text {
			t.Fatalf("case %d: printing is not stable: %q then %q", i, text, again)
		}
	}
}

func TestPrintCanonical(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		v    Value
		want string
	}{
		{"float with decimal", Float(3), "3.0"},
		{"float fraction", Float(2.5), "2.5"},
		{"negative zero", Float(math.Copysign(0, -1)), "-0.0"},
		{"large float", Float(1e21), "1.0e21"},
		{"small float", Float(1.5e-7), "1.5e-7"},
		{"nan", Float(math.NaN()), "##NaN"},
		{"map order", MapValue(NewMap(Keyword("b"), Int(1), Keyword("a"), Int(2), String("a"), Nil)), `{"a" nil :a 2 :b 1}`},
		{"escapes", String("q\"b\\n\nt\tc\x01"), `"q\"b\\n\nt\tc\u0001"`},
		{"invalid utf8", String("a\xffb"), `"a\xffb"`},
		{"quote list", List([]Value{Symbol("quote"), Symbol("x")}), "'x"},
		{"empty", Vector(nil), "[]"},
		{"empty map", MapValue(nil), "{}"},
		{"nested", Vector([]Value{List([]Value{Int(1)}), MapValue(NewMap(Keyword("k"), Vector(nil)))}), "[(1) {:k []}]"},
	}
	for _, tc := range cases {
		if got := Print(tc.v); got != tc.want {
			t.Errorf("%s: Print = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestEqualAndHash(t *testing.T) {
	t.Parallel()
	pairs := []struct {
		a, b Value
		eq   bool
	}{
		{Int(1), Float(1), false},
		{Vector([]Value{Int(1)}), List([]Value{Int(1)}), true},
		{MapValue(NewMap(Keyword("a"), Int(1), Keyword("b"), Int(2))), MapValue(NewMap(Keyword("b"), Int(2), Keyword("a"), Int(1))), true},
		{String("a"), Keyword("a"), false},
		{Keyword("a"), Symbol("a"), false},
		{Float(0), Float(math.Copysign(0, -1)), true},
		{Nil, False, false},
	}
	for _, p := range pairs {
		if got := Equal(p.a, p.b); got != p.eq {
			t.Errorf("Equal(%s, %s) = %v", Print(p.a), Print(p.b), got)
		}
		if p.eq && Hash(p.a) != Hash(p.b) {
			t.Errorf("Hash differs for equal %s and %s", Print(p.a), Print(p.b))
		}
	}
}

func TestBigMapLookup(t *testing.T) {
	t.Parallel()
	b := NewMapBuilder(100)
	for i := range 100 {
		b.Set(Int(int64(i)), String(strings.Repeat("x", i%5)))
	}
	m := b.Map()
	for i := range 100 {
		v, ok := m.Get(Int(int64(i)))
		if !ok || v.Str() != strings.Repeat("x", i%5) {
			t.Fatalf("Get(%d) = %s, %v", i, Print(v), ok)
		}
	}
	if _, ok := m.Get(Int(100)); ok {
		t.Fatal("Get(100) found a missing key")
	}
	m2 := m.Assoc(Int(100), True).Dissoc(Int(0))
	if _, ok := m2.Get(Int(0)); ok || m2.Len() != 100 {
		t.Fatalf("Assoc/Dissoc: len %d", m2.Len())
	}
	if _, ok := m.Get(Int(0)); !ok {
		t.Fatal("Dissoc changed the original map")
	}
}

func FuzzRead(f *testing.F) {
	for _, s := range []string{
		"(+ 1 2)", "{:a 1, :b [1 2 #\"x\"]}", "^{:pre (fn [c] true)} (step \"a\" (call :x))",
		"\"\\u00e9\\x80\"", "#_ x 'y ##-Inf", "(((", "{:a}", "9223372036854775808", "^:k",
		"(defn f [a & r] (let [{:keys [x]} a] x))", "; c\n[1.5e10 -0.0]",
		"#{1 #{2} [3]}", "#{1 1}", "#(+ % %2 %&)", "#(#(%))", "(map #(* % %) #{3 1})", "#{", "#(",
		"(loop [i 0 acc []] (if (< i 3) (recur (inc i) (conj acc i)) acc))", "(for [x [1 2] :when (odd? x) :let [y x]] y)",
		"(let [{:keys [user/name] :or {name 1}} {}] name)", "(case 1 (1 2) :a :b)", "(match [1 2] [a & r] r :else 0)",
		"(plan :name \"p\" :language rtfs20 :body (do 1))", "(condp = 1 1 :a)", "(some-> {:a 1} :a inc)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		forms, err := Read(src, "fuzz")
		if err != nil {
			var e *Error
			if !asErrorType(err, &e) || e.Pos.Line < 1 || e.Pos.Col < 1 {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		// Canonical text of what was read must read back to the same text.
		text := PrintProgram(forms)
		again, err := Read(text, "fuzz2")
		if err != nil {
			t.Fatalf("canonical text does not read back: %q: %v", text, err)
		}
		if got := PrintProgram(again); got != text {
			t.Fatalf("canonical form unstable:\n%q\n%q", text, got)
		}
		if !utf8.ValidString(src) {
			return
		}
		// Compiling and running must never panic, whatever was read.
		if p, err := Compile(forms, Options{File: "fuzz", Limits: Limits{Fuel: 20000}}); err == nil {
			_, _ = p.Eval(t.Context())
		}
	})
}

func asErrorType(err error, e **Error) bool {
	x, ok := err.(*Error)
	*e = x
	return ok
}

func TestSizeStopsOnSharedStructure(t *testing.T) {
	t.Parallel()
	v := Int(0)
	for range 64 {
		v = Vector([]Value{v, v})
	}
	if n, ok := Size(v, 1000); ok || n <= 1000 || n > 2000 {
		t.Errorf("Size of a 2^64-node value = %d, %v; want a stop just past 1000", n, ok)
	}
	if !Equal(v, v) {
		t.Error("shared structure not equal to itself")
	}
	if n, ok := Size(MapValue(NewMap(Keyword("a"), Vector([]Value{Int(1), Int(2)}))), 10); !ok || n != 5 {
		t.Errorf("Size of {:a [1 2]} = %d, %v; want 5", n, ok)
	}
}
