package ledger

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ralphloop/ralph/rtfs"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// vectorActions are the fixed actions of the golden test vectors: one with
// every kind of RTFS value and every field set, one with every optional
// field empty, and one failure.
func vectorActions() []*Action {
	every := rtfs.MapValue(rtfs.NewMap(
		rtfs.Keyword("nil"), rtfs.Nil,
		rtfs.Keyword("bool"), rtfs.True,
		rtfs.Keyword("int"), rtfs.Int(-42),
		rtfs.Keyword("float"), rtfs.Float(2.5),
		rtfs.Keyword("string"), rtfs.String("tab\tquote\" newline\n é"),
		rtfs.Keyword("ns/keyword"), rtfs.Keyword("contract/precondition-failed"),
		rtfs.Keyword("symbol"), rtfs.Symbol("audit.succeeded?"),
		rtfs.Keyword("list"), rtfs.List([]rtfs.Value{rtfs.Symbol("inc"), rtfs.Int(1)}),
		rtfs.Keyword("vector"), rtfs.Vector([]rtfs.Value{rtfs.Int(1), rtfs.Float(3.0)}),
		rtfs.Keyword("regex"), rtfs.Regex(regexp.MustCompile(`^ok\s+`)),
		rtfs.String("string key"), rtfs.MapValue(rtfs.NewMap(rtfs.Int(2), rtfs.String("b"), rtfs.Int(1), rtfs.String("a"))),
	))
	return []*Action{
		{
			Seq: 1, RunID: "run-0190a1b2", ActionID: "0190a1b2-0000-7000-8000-000000000001",
			ParentActionID: "0190a1b2-0000-7000-8000-000000000000", PlanID: "plan-1", IntentID: "intent-1",
			Type: CapabilityCall, FunctionName: "ccos.echo",
			Arguments:  []rtfs.Value{every, rtfs.String("second")},
			Result:     rtfs.Vector([]rtfs.Value{rtfs.Keyword("ok"), rtfs.Float(0.1)}),
			Success:    true,
			Cost:       0.0125,
			DurationMS: 17,
			Timestamp:  time.Date(2025, 7, 20, 12, 0, 0, 123456789, time.UTC),
			Metadata: map[string]rtfs.Value{
				MetaIntentID:                rtfs.String("intent-1"),
				MetaConstitutionalRuleID:    rtfs.String("rule-7"),
				MetaDelegationDecisionID:    rtfs.String("deleg-3"),
				MetaCapabilityAttestationID: rtfs.String("att-9"),
				"exit":                      rtfs.String("0"),
			},
		},
		{
			Seq: 2, ActionID: "minimal", Type: RunStarted,
			Timestamp: time.Unix(0, 0).UTC(),
		},
		{
			Seq: 3, RunID: "run-0190a1b2", ActionID: "0190a1b2-0000-7000-8000-000000000003",
			PlanID: "plan-1", IntentID: "intent-1", Type: PlanStepFailed, FunctionName: "Tests",
			Success: false, ErrorMessage: "exit status 1", Cost: 0, DurationMS: 1500,
			Timestamp: time.Date(1999, 12, 31, 23, 59, 59, 1, time.UTC),
		},
	}
}

// vectorKey is the fixed key that signs the golden checkpoint.
func vectorKey() ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i + 1)
	}
	return ed25519.NewKeyFromSeed(seed)
}

func renderVectors() string {
	var b strings.Builder
	b.WriteString("# Golden vectors for the ralph ledger format (docs/ledger.md).\n")
	b.WriteString("# Regenerate only on purpose: go test ./ledger -run TestGoldenVectors -update\n")
	var chain Hash
	for _, a := range vectorActions() {
		enc := AppendCanonical(nil, a)
		ah := ComputeActionHash(a)
		chain = ChainLink(chain, ah, a.Seq)
		fmt.Fprintf(&b, "\naction %d %s\n", a.Seq, a.Type)
		fmt.Fprintf(&b, "encoding %s\n", hex.EncodeToString(enc))
		fmt.Fprintf(&b, "action_hash %s\n", ah)
		fmt.Fprintf(&b, "chain_hash %s\n", chain)
	}
	key := vectorKey()
	ts := time.Date(2025, 7, 20, 12, 0, 1, 0, time.UTC)
	cp := signCheckpoint(key, 3, chain, ts)
	fmt.Fprintf(&b, "\ncheckpoint 3\n")
	fmt.Fprintf(&b, "public_key %s\n", hex.EncodeToString(key.Public().(ed25519.PublicKey)))
	fmt.Fprintf(&b, "message %s\n", hex.EncodeToString(CheckpointMessage(cp.Seq, cp.ChainHash, cp.Time)))
	fmt.Fprintf(&b, "signature %s\n", hex.EncodeToString(cp.Signature))
	fmt.Fprintf(&b, "stored %s\n", hex.EncodeToString(encodeCheckpoint(cp)))
	return b.String()
}

func TestGoldenVectors(t *testing.T) {
	path := filepath.Join("testdata", "vectors.golden")
	got := renderVectors()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("the canonical encoding or a hash changed; that breaks every existing ledger. (-golden +now):\n%s", diff)
	}
}

func TestCanonicalRoundTrip(t *testing.T) {
	t.Parallel()
	for _, a := range vectorActions() {
		enc := AppendCanonical(nil, a)
		got, err := DecodeCanonical(enc)
		if err != nil {
			t.Fatalf("decode %s: %v", a.ActionID, err)
		}
		if again := AppendCanonical(nil, &got); !bytes.Equal(again, enc) {
			t.Errorf("%s: re-encoding the decoded action differs", a.ActionID)
		}
		if diff := cmp.Diff(*a, got, cmpActions); diff != "" {
			t.Errorf("%s: round trip (-want +got):\n%s", a.ActionID, diff)
		}
	}
}

// cmpActions compares RTFS values by their canonical text.
var cmpActions = cmp.Options{
	cmp.Comparer(func(a, b rtfs.Value) bool { return rtfs.Print(a) == rtfs.Print(b) }),
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
}

func TestEncodingIsCanonical(t *testing.T) {
	t.Parallel()
	a := vectorActions()[0]
	// The same metadata inserted in another order encodes identically.
	b := a.clone()
	b.Metadata = map[string]rtfs.Value{}
	keys := sortedKeys(a.Metadata)
	for i := len(keys) - 1; i >= 0; i-- {
		b.Metadata[keys[i]] = a.Metadata[keys[i]]
	}
	if ComputeActionHash(a) != ComputeActionHash(b) {
		t.Fatal("metadata order changed the hash")
	}
	// Every covered field changes the hash.
	mutations := map[string]func(*Action){
		"seq":              func(x *Action) { x.Seq++ },
		"run_id":           func(x *Action) { x.RunID += "x" },
		"action_id":        func(x *Action) { x.ActionID += "x" },
		"parent_action_id": func(x *Action) { x.ParentActionID = "" },
		"plan_id":          func(x *Action) { x.PlanID += "x" },
		"intent_id":        func(x *Action) { x.IntentID += "x" },
		"action_type":      func(x *Action) { x.Type = InternalStep },
		"function_name":    func(x *Action) { x.FunctionName += "x" },
		"arguments":        func(x *Action) { x.Arguments = x.Arguments[:1] },
		"result":           func(x *Action) { x.Result = rtfs.Nil },
		"success":          func(x *Action) { x.Success = !x.Success },
		"error_message":    func(x *Action) { x.ErrorMessage = "boom" },
		"cost":             func(x *Action) { x.Cost = math.Nextafter(x.Cost, 1) },
		"duration_ms":      func(x *Action) { x.DurationMS++ },
		"timestamp":        func(x *Action) { x.Timestamp = x.Timestamp.Add(time.Nanosecond) },
		"metadata":         func(x *Action) { x.Metadata["exit"] = rtfs.String("1") },
	}
	base := ComputeActionHash(a)
	for name, mutate := range mutations {
		c := a.clone()
		mutate(c)
		if ComputeActionHash(c) == base {
			t.Errorf("changing %s does not change action_hash", name)
		}
	}
	// The fields outside the encoding do not.
	c := a.clone()
	c.ActionHash, c.ChainHash, c.CheckpointSeq = Hash{1}, Hash{2}, 99
	if ComputeActionHash(c) != base {
		t.Error("hashes or checkpoint_seq leaked into the encoding")
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	t.Parallel()
	enc := AppendCanonical(nil, vectorActions()[0])
	cases := map[string][]byte{
		"empty":          nil,
		"version":        append([]byte{9}, enc[1:]...),
		"truncated":      enc[:len(enc)-3],
		"trailing":       append(append([]byte(nil), enc...), 0),
		"huge length":    append(append([]byte(nil), enc[:9]...), 0xff, 0xff, 0xff, 0xff),
		"bad type name":  AppendCanonical(nil, &Action{ActionID: "x", Type: ActionType(200)}),
		"bad value text": appendValueRaw(AppendCanonical(nil, &Action{ActionID: "x", Type: RunStarted}), "{:a"),
		"not canonical":  appendValueRaw(AppendCanonical(nil, &Action{ActionID: "x", Type: RunStarted}), "{:b 1 :a 2}"),
	}
	for name, b := range cases {
		if _, err := DecodeCanonical(b); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// appendValueRaw replaces the result text of a minimal encoding.
func appendValueRaw(enc []byte, text string) []byte {
	i := bytes.Index(enc, []byte("nil"))
	out := append([]byte(nil), enc[:i-4]...)
	out = appendStr(out, text)
	return append(out, enc[i+3:]...)
}

func TestValidate(t *testing.T) {
	t.Parallel()
	fn := rtfs.FnValue(&rtfs.Fn{})
	cases := []struct {
		name   string
		mutate func(*Action)
		want   string
	}{
		{"no type", func(a *Action) { a.Type = TypeInvalid }, "action_type"},
		{"no id", func(a *Action) { a.ActionID = "" }, "action_id is empty"},
		{"long id", func(a *Action) { a.PlanID = strings.Repeat("p", 2000) }, "plan_id is 2000 bytes"},
		{"bad utf8", func(a *Action) { a.FunctionName = "\xff" }, "function_name is not valid UTF-8"},
		{"own parent", func(a *Action) { a.ParentActionID = a.ActionID }, "names itself"},
		{"nan cost", func(a *Action) { a.Cost = math.NaN() }, "not a finite number"},
		{"negative duration", func(a *Action) { a.DurationMS = -1 }, "negative"},
		{"zero time", func(a *Action) { a.Timestamp = time.Time{} }, "outside the years"},
		{"fn argument", func(a *Action) { a.Arguments = []rtfs.Value{rtfs.Vector([]rtfs.Value{fn})} }, "arguments[0]: a function"},
		{"fn in metadata", func(a *Action) { a.Metadata = map[string]rtfs.Value{"f": fn} }, `metadata "f"`},
		{"empty metadata key", func(a *Action) { a.Metadata = map[string]rtfs.Value{"": rtfs.Nil} }, "metadata key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := sample(1)
			tc.mutate(a)
			err := Validate(a)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if err := Validate(sample(1)); err != nil {
		t.Fatalf("valid action refused: %v", err)
	}
}

func TestActionTypeNames(t *testing.T) {
	t.Parallel()
	want := strings.Fields(`PlanStarted PlanCompleted PlanAborted PlanPaused PlanResumed PlanStepStarted
		PlanStepCompleted PlanStepFailed PlanStepRetrying CapabilityCall InternalStep RunStarted RunCompleted
		RunFailed RunStopped RunAborted IterationStarted IterationCompleted PlanGenerated LlmConsultation
		GovernanceDecision ContractCheck ContractViolation CompensationStarted CompensationCompleted
		CompensationFailed StopConditionsEvaluated CapabilityDeduplicated AgentToolUse RateLimitWait ControlRequested HookRan NotifyFailed WorkspaceRestored
		BatchStarted TaskStarted TaskEnded TaskMerged`)
	var got []string
	for _, ty := range ActionTypes() {
		got = append(got, ty.String())
		back, err := ParseActionType(ty.String())
		if err != nil || back != ty {
			t.Errorf("ParseActionType(%q) = %v, %v", ty, back, err)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("action types (-want +got):\n%s", diff)
	}
	if _, err := ParseActionType("capabilitycall"); err == nil {
		t.Error("names must be case-sensitive")
	}
	if TypeInvalid.Valid() {
		t.Error("the zero type must be invalid")
	}
}

// FuzzDecodeCanonical: any bytes either decode to an action whose
// re-encoding is the same bytes, or fail with an error; never a panic.
func FuzzDecodeCanonical(f *testing.F) {
	for _, a := range vectorActions() {
		f.Add(AppendCanonical(nil, a))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeCanonical(b)
		if err != nil {
			return
		}
		if Validate(&a) != nil {
			return // decodable but not recordable (e.g. an empty action_id)
		}
		if again := AppendCanonical(nil, &a); !bytes.Equal(again, b) {
			t.Fatalf("decode/encode is not the identity:\n in %x\nout %x", b, again)
		}
	})
}

// FuzzParseJSONAction: any line either parses or fails; never a panic.
func FuzzParseJSONAction(f *testing.F) {
	f.Add([]byte(`{"seq":1,"action_id":"a","action_type":"RunStarted","timestamp":"2025-01-01T00:00:00Z","arguments":[1,":k",{"a":[1.5]}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var a Action
		_ = a.UnmarshalJSON(b)
	})
}
