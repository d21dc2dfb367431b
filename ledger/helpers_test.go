package ledger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ralphloop/ralph/rtfs"
)

// baseTime is the timestamp of sample action 0.
var baseTime = time.Date(2025, 7, 20, 12, 0, 0, 123456789, time.UTC)

// sample returns a realistic capability-call action: about 500 bytes
// encoded, with RTFS arguments, result and metadata.
func sample(i int) *Action {
	parent := ""
	if i%4 != 0 {
		parent = fmt.Sprintf("act-%06d", i-i%4)
	}
	return &Action{
		RunID:          fmt.Sprintf("run-%d", i%3),
		ActionID:       fmt.Sprintf("act-%06d", i),
		ParentActionID: parent,
		PlanID:         fmt.Sprintf("plan-%d", i/10),
		IntentID:       "intent-main",
		Type:           CapabilityCall,
		FunctionName:   "shell.exec",
		Arguments: []rtfs.Value{rtfs.MapValue(rtfs.NewMap(
			rtfs.Keyword("cmd"), rtfs.String("go"),
			rtfs.Keyword("args"), rtfs.Vector([]rtfs.Value{rtfs.String("test"), rtfs.String("./...")}),
			rtfs.Keyword("timeout-ms"), rtfs.Int(60000),
		))},
		Result: rtfs.MapValue(rtfs.NewMap(
			rtfs.Keyword("exit"), rtfs.Int(0),
			rtfs.Keyword("stdout"), rtfs.String(fmt.Sprintf("ok  \tgithub.com/ralphloop/ralph/ledger\t%d.%03ds\nok  \tgithub.com/ralphloop/ralph/rtfs\t0.412s\n", i%9, i%1000)),
			rtfs.Keyword("stderr"), rtfs.String(""),
			rtfs.Keyword("duration-ms"), rtfs.Int(int64(1200+i%300)),
			rtfs.Keyword("truncated"), rtfs.False,
		)),
		Success:    true,
		Cost:       0.0001 * float64(i%7),
		DurationMS: int64(1200 + i%300),
		Timestamp:  baseTime.Add(time.Duration(i) * time.Millisecond),
		Metadata: map[string]rtfs.Value{
			MetaIntentID:                rtfs.String("intent-main"),
			MetaConstitutionalRuleID:    rtfs.String("rule.shell-allowlist"),
			MetaCapabilityAttestationID: rtfs.String("att-shell-exec-1"),
			"exit":                      rtfs.String("0"),
			"cmd":                       rtfs.String("go"),
		},
	}
}

func newMemStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(Options{InMemory: true, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openDir(t testing.TB, dir string, sync bool) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, SyncWrites: sync, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func appendN(t testing.TB, s *Store, from, n int) []Receipt {
	t.Helper()
	out := make([]Receipt, 0, n)
	for i := from; i < from+n; i++ {
		r, err := s.Append(context.Background(), sample(i))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		out = append(out, r)
	}
	return out
}

func mustVerify(t testing.TB, s *Store) VerifyReport {
	t.Helper()
	rep, err := s.Verify(context.Background(), nil)
	if err != nil {
		t.Fatalf("verify: %v (report %+v)", err, rep)
	}
	return rep
}

// TestMain points the key and witness directories at a temporary
// directory, so no test reads or writes the real home.
func TestMain(m *testing.M) {
	if os.Getenv(crashEnv) == "" {
		home, err := os.MkdirTemp("", "ledger-test-home")
		if err != nil {
			panic(err)
		}
		os.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
		os.Setenv("XDG_STATE_HOME", filepath.Join(home, "state"))
		code := m.Run()
		os.RemoveAll(home)
		os.Exit(code)
	}
	os.Exit(m.Run())
}
