package rtfs

import "testing"

func TestTypeCheck(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, typ, val, wantErr string
	}{
		{"string ok", ":string", `"x"`, ""},
		{"string bad", ":string", "1", "expected string, got int"},
		{"map field", "[:map [:message :string]]", "{:message 1}", ":message expected string, got int"},
		{"map ok", "[:map [:message :string]]", `{:message "hi"}`, ""},
		{"map missing", "[:map [:message :string]]", "{}", ":message expected :string (required), got nil"},
		{"map optional", "[:map [:cmd :string] [:args {:optional true} [:vector :string]]]", `{:cmd "go"}`, ""},
		{"map unknown key", "[:map [:cmd :string]]", `{:cmd "go" :shell true}`, ":shell is not a known key"},
		{"nested path", "[:map [:args [:vector :string]]]", `{:args ["a" 2]}`, ":args[1] expected string, got int"},
		{"tuple", "[:tuple :number :number]", "[1 2.5]", ""},
		{"tuple arity", "[:tuple :number :number]", "[1]", "expected a vector of 2, got vector"},
		{"tuple elem", "[:tuple :number :number]", `[1 "2"]`, "[1] expected number, got string"},
		{"map-of", "[:map-of :string :string]", `{"A" "b" "C" 1}`, `"C" expected string, got int`},
		{"maybe", "[:maybe :int]", "nil", ""},
		{"or", "[:or :int :string]", ":k", "expected [:or :int :string], got keyword"},
		{"enum", "[:enum :a :b]", ":c", "expected one of [:a :b], got keyword"},
		{"any", ":any", "{:x [1]}", ""},
	}
	for _, tc := range cases {
		typ, err := ParseType(tc.typ)
		if err != nil {
			t.Fatalf("%s: ParseType(%s): %v", tc.name, tc.typ, err)
		}
		v, err := ReadValue(tc.val)
		if err != nil {
			t.Fatal(err)
		}
		err = typ.Check(v)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: unexpected %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestTypeParseErrors(t *testing.T) {
	t.Parallel()
	for _, src := range []string{":strin", "[:vector]", "[:map :x]", "[:foo :int]", "5", "[:map-of :int]"} {
		if _, err := ParseType(src); err == nil {
			t.Errorf("ParseType(%s) accepted a bad type", src)
		}
	}
}

func TestTypeIntrospection(t *testing.T) {
	t.Parallel()
	typ := MustParseType(`[:map [:cmd :string] [:args {:optional true} [:vector :string]] [:env {:optional true} [:map-of :string :string]]]`)
	if typ.Kind() != "map" {
		t.Fatalf("Kind = %q, want map", typ.Kind())
	}
	fs := typ.Fields()
	if len(fs) != 3 || Print(fs[0].Key) != ":cmd" || fs[0].Optional || !fs[1].Optional || fs[1].Type.Kind() != "vector" {
		t.Fatalf("Fields = %+v", fs)
	}
	if el := fs[1].Type.Elems(); len(el) != 1 || el[0].Kind() != "string" {
		t.Fatalf("vector Elems = %v", el)
	}
	if el := fs[2].Type.Elems(); len(el) != 2 || el[0].Kind() != "string" || fs[2].Type.Kind() != "map-of" {
		t.Fatalf("map-of Elems = %v", el)
	}
	if MustParseType(":int").Fields() == nil || len(MustParseType(":int").Fields()) != 0 {
		t.Fatal("a primitive has no fields")
	}
}
