package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ralphloop/ralph/rtfs"
)

func TestJSONForm(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	a := vectorActions()[0]
	a.Seq = 0
	if _, err := s.Append(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(*a)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "action.json.golden")
	var pretty bytes.Buffer
	json.Indent(&pretty, b, "", "  ")
	pretty.WriteByte('\n')
	// The checkpoint key is ephemeral but the action and its hashes are fixed.
	if *update {
		os.WriteFile(path, pretty.Bytes(), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), pretty.String()); diff != "" {
		t.Errorf("JSON form changed (-golden +now):\n%s", diff)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]any{
		"action_type": "CapabilityCall", "timestamp": "2025-07-20T12:00:00.123456789Z", "duration_ms": 17.0,
		"seq": 1.0, "checkpoint_seq": 1.0, "action_hash": a.ActionHash.String(),
	} {
		if m[field] != want {
			t.Errorf("%s = %#v, want %#v", field, m[field], want)
		}
	}
	var back Action
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	// Lossless for everything that maps naturally; lists, symbols and regexes
	// come back as their canonical text.
	if back.Result.String() != a.Result.String() || back.ActionHash != a.ActionHash || back.Metadata["exit"].Str() != "0" {
		t.Errorf("round trip lost data: %+v", back)
	}
	got := back.Arguments[0].AsMap()
	if v := got.GetKey("ns/keyword"); v.Kind() != rtfs.KindKeyword || v.Str() != "contract/precondition-failed" {
		t.Errorf("keyword came back as %v", v)
	}
	if v := got.GetKey("float"); v.Kind() != rtfs.KindFloat || v.AsFloat() != 2.5 {
		t.Errorf("float came back as %v", v)
	}
	if v := got.GetKey("vector").Items(); len(v) != 2 || v[1].Kind() != rtfs.KindFloat {
		t.Errorf("3.0 must stay a float: %v", v)
	}
	if v := got.GetKey("list"); v.Kind() != rtfs.KindString || v.Str() != "(inc 1)" {
		t.Errorf("list came back as %v", v)
	}
}

func TestValueJSONMapping(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v    rtfs.Value
		want string
	}{
		{rtfs.Nil, `null`},
		{rtfs.Int(-7), `-7`},
		{rtfs.Float(3), `3.0`},
		{rtfs.Float(1e21), `1.0e21`},
		{rtfs.String("a\"b\u2028"), `"a\"b\u2028"`},
		{rtfs.Keyword("ok"), `":ok"`},
		{rtfs.Symbol("x"), `"x"`},
		{rtfs.Vector([]rtfs.Value{rtfs.True, rtfs.Nil}), `[true,null]`},
		{rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("b"), rtfs.Int(1), rtfs.String("a"), rtfs.Int(2), rtfs.Int(3), rtfs.Int(4))), `{"\"a\"":2,"3":4,":b":1}`},
	}
	for _, tc := range cases {
		got := string(AppendValueJSON(nil, tc.v))
		if tc.v.Kind() == rtfs.KindMap {
			// key order is the map's canonical order: "a" then 3 then :b
			tc.want = `{"a":2,"3":4,":b":1}`
		}
		if got != tc.want {
			t.Errorf("%s → %s, want %s", rtfs.Print(tc.v), got, tc.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("%s is not valid JSON", got)
		}
	}
	for text, want := range map[string]string{
		`":ok"`: ":ok", `":not a kw"`: `":not a kw"`, `":"`: `":"`, `12`: "12", `1.5e3`: "1500.0", `{"a":[1,":b"]}`: `{"a" [1 :b]}`,
	} {
		v, err := ValueFromJSON([]byte(text))
		if err != nil || rtfs.Print(v) != want {
			t.Errorf("%s → %s, %v; want %s", text, rtfs.Print(v), err, want)
		}
	}
	if _, err := ValueFromJSON([]byte(`99999999999999999999`)); err == nil {
		t.Error("an integer beyond 64 bits must be refused")
	}
}

func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	src := newMemStore(t)
	appendN(t, src, 0, 30)
	var out bytes.Buffer
	n, err := src.Export(&out, Filter{})
	if err != nil || n != 30 || strings.Count(out.String(), "\n") != 30 {
		t.Fatalf("export wrote %d, %v", n, err)
	}
	var run bytes.Buffer
	if n, err := src.Export(&run, Filter{RunID: "run-1"}); err != nil || n != 10 {
		t.Fatalf("export --run wrote %d, %v", n, err)
	}

	dst := newMemStore(t)
	appendN(t, dst, 100, 2) // imported actions go after what is there
	rep, err := dst.Import(context.Background(), bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Actions != 30 || rep.FirstSeq != 3 || rep.LastSeq != 32 {
		t.Fatalf("import report %+v", rep)
	}
	r := mustVerify(t, dst)
	if r.Checkpoints != 3 {
		t.Errorf("30 imported actions should share one checkpoint; got %d checkpoints in all", r.Checkpoints)
	}
	for i := range 30 {
		orig, _ := src.GetSeq(uint64(i + 1))
		got, err := dst.GetSeq(uint64(i + 3))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(orig, got, cmpActions, cmp.FilterPath(func(p cmp.Path) bool {
			switch p.Last().String() {
			case ".Seq", ".ChainHash", ".ActionHash", ".CheckpointSeq":
				return true
			}
			return false
		}, cmp.Ignore())); diff != "" {
			t.Fatalf("seq %d changed on import (-orig +imported):\n%s", i+1, diff)
		}
	}
	// Importing the same actions again would duplicate their ids.
	if _, err := dst.Import(context.Background(), bytes.NewReader(out.Bytes())); err == nil || !strings.Contains(err.Error(), "line 1:") {
		t.Fatalf("second import = %v", err)
	}
}

func TestImportRejectsMalformedInputWhole(t *testing.T) {
	t.Parallel()
	src := newMemStore(t)
	appendN(t, src, 0, 3)
	var good bytes.Buffer
	src.Export(&good, Filter{})
	lines := strings.Split(strings.TrimSpace(good.String()), "\n")
	cases := []struct {
		name, bad, want string
	}{
		{"not json", `{"action_id": `, "line 3:"},
		{"unknown field", strings.Replace(lines[0], `"seq":1`, `"sequence":1`, 1), `line 3: unknown field "sequence"`},
		{"unknown type", strings.Replace(lines[0], "CapabilityCall", "Teleport", 1), `line 3: unknown action type "Teleport"`},
		{"bad timestamp", strings.Replace(lines[0], "2025-07-20T", "20/07/2025 ", 1), "line 3: \"timestamp\" is not RFC 3339"},
		{"wrong kind", strings.Replace(lines[0], `"success":true`, `"success":"yes"`, 1), `line 3: "success" must be a JSON boolean`},
		{"no id", strings.Replace(lines[0], `"action_id":"act-000000"`, `"action_id":""`, 1), "line 3: \"action_id\" is missing"},
		{"duplicate id", lines[1], "line 3: action_id act-000001 already appears on line 2"},
		{"negative duration", strings.Replace(lines[0], `"duration_ms":1200`, `"duration_ms":-5`, 1), "line 3: action act-000000: duration_ms -5 is negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := newMemStore(t)
			in := lines[0] + "\n" + lines[1] + "\n" + tc.bad + "\n" + lines[2] + "\n"
			_, err := dst.Import(context.Background(), strings.NewReader(in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("import = %v, want an error containing %q", err, tc.want)
			}
			if h := dst.Head(); h.Seq != 0 {
				t.Fatalf("a rejected import recorded %d actions", h.Seq)
			}
		})
	}
	dst := newMemStore(t)
	if rep, err := dst.Import(context.Background(), strings.NewReader("\n  \n")); err != nil || rep.Actions != 0 {
		t.Fatalf("blank input = %+v, %v", rep, err)
	}
	var dup *DuplicateError
	_, err := dst.Import(context.Background(), strings.NewReader(good.String()+good.String()))
	if err == nil || errors.As(err, &dup) || !strings.Contains(err.Error(), "line 4:") {
		t.Fatalf("repeated lines = %v", err)
	}
}

func TestImportSpanningTransactions(t *testing.T) {
	t.Parallel()
	src := newMemStore(t)
	var in bytes.Buffer
	for i := range 4000 { // ~4 MB with index entries: several 1.2 MB transactions
		a := sample(i)
		a.Timestamp = baseTime
		in.Write(AppendJSON(nil, a))
		in.WriteByte('\n')
	}
	rep, err := src.Import(context.Background(), &in)
	if err != nil || rep.Actions != 4000 || rep.LastSeq != 4000 {
		t.Fatalf("import %+v, %v", rep, err)
	}
	r := mustVerify(t, src)
	if r.Checkpoints < 2 {
		t.Fatalf("expected the import to need several transactions, got %d checkpoints", r.Checkpoints)
	}
}

func TestTree(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	ctx := context.Background()
	mk := func(id, parent string, ty ActionType, fn string, ok bool) {
		a := &Action{ActionID: id, ParentActionID: parent, RunID: "r", Type: ty, FunctionName: fn, Success: ok, Timestamp: baseTime}
		if !ok {
			a.ErrorMessage = "exit status 1\nmore"
		}
		if _, err := s.Append(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	mk("run", "", RunStarted, "run", true)
	mk("plan", "run", PlanStarted, "plan", true)
	mk("step", "plan", PlanStepStarted, "Tests", true)
	mk("call", "step", CapabilityCall, "shell.exec", false)
	mk("step2", "plan", PlanStepStarted, "Fix", true)
	mk("done", "run", RunFailed, "run", false)
	list, err := s.ByRun("r")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteTree(&b, BuildTree(list)); err != nil {
		t.Fatal(err)
	}
	want := `#1 RunStarted run ok
├─ #2 PlanStarted plan ok
│  ├─ #3 PlanStepStarted Tests ok
│  │  └─ #4 CapabilityCall shell.exec FAILED (exit status 1 …)
│  └─ #5 PlanStepStarted Fix ok
└─ #6 RunFailed run FAILED (exit status 1 …)
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("tree (-want +got):\n%s", diff)
	}
}
