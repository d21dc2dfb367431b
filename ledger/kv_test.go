package ledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/rtfs"
)

func TestKVPersistsAcrossReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(Options{Dir: dir, SyncWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	want := rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("n"), rtfs.Int(3), rtfs.Keyword("s"), rtfs.String("x\ny")))
	if err := s.KV().Put(ctx, "a/b", want); err != nil {
		t.Fatal(err)
	}
	if err := s.KV().Put(ctx, "", rtfs.Nil); err == nil {
		t.Error("empty key accepted")
	}
	if _, err := s.Append(ctx, &Action{ActionID: "x", Type: PlanStarted}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, ok, err := s.KV().Get(ctx, "a/b")
	if err != nil || !ok || !rtfs.Equal(got, want) {
		t.Fatalf("Get = %s %v %v", rtfs.Print(got), ok, err)
	}
	if _, ok, _ := s.KV().Get(ctx, "missing"); ok {
		t.Error("missing key found")
	}
	if rep, err := s.Verify(ctx, nil); err != nil || !rep.OK() {
		t.Errorf("verify with a KV entry present: %+v %v", rep, err)
	}
}

func TestOpenAfterCrashDuringCreation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// What a SIGKILL between creating the marker's temp file and renaming it leaves.
	if err := os.WriteFile(filepath.Join(dir, ".LEDGER.tmp123"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("a store whose creation was interrupted must open as new: %v", err)
	}
	s.Close()
}

// An action's kv writes commit with it: an action refused (here, one of
// its writes is not data) leaves neither; a staged Put writes nothing.
func TestKVWritesCommitWithTheirAction(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	ctx := context.Background()
	a := sample(0)
	a.KV = []KVWrite{{Key: "user/c", Value: rtfs.Int(1)}, {Key: "idem/x", Value: rtfs.Nil}}
	if _, err := s.Append(ctx, a); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.KV().Get(ctx, "user/c"); err != nil || !ok || v.AsInt() != 1 {
		t.Fatalf("user/c = %v %v %v", v, ok, err)
	}
	if _, ok, _ := s.KV().Get(ctx, "idem/x"); !ok {
		t.Fatal("a nil write is not stored")
	}
	got, err := s.GetSeq(1)
	if err != nil || got.KV != nil {
		t.Fatalf("read back: %v, KV %v", err, got.KV)
	}
	b := sample(1)
	b.KV = []KVWrite{{Key: "user/c", Value: rtfs.Int(2)}, {Key: "", Value: rtfs.Int(3)}}
	if _, err := s.Append(ctx, b); err == nil || !strings.Contains(err.Error(), "key is empty") {
		t.Fatalf("append with an empty kv key = %v", err)
	}
	sctx, st := StageKV(ctx)
	if err := s.KV().Put(sctx, "user/c", rtfs.Int(4)); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := s.KV().Get(ctx, "user/c"); v.AsInt() != 1 || s.Head().Seq != 1 {
		t.Fatalf("user/c = %v, head %d: a refused action or a staged put changed the store", v, s.Head().Seq)
	}
	if w := st.Writes(); len(w) != 1 || w[0].Key != "user/c" || w[0].Value.AsInt() != 4 {
		t.Fatalf("staged %v", w)
	}
}

const kvChildEnv = "RALPH_LEDGER_KV_CHILD_DIR"

// TestKVCounterChild is the child of TestKVCounterSurvivesKills: it counts
// in the kv, each increment riding on the CapabilityCall that records it,
// until it is killed.
func TestKVCounterChild(t *testing.T) {
	dir := os.Getenv(kvChildEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestKVCounterSurvivesKills")
	}
	s, err := Open(Options{Dir: dir, MemTableSize: 8 << 20, KeyDir: filepath.Join(filepath.Dir(dir), "keys")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	for {
		v, _, err := s.KV().Get(ctx, "user/n")
		if err != nil {
			os.Exit(2)
		}
		a := sample(0)
		a.ActionID, a.ParentActionID, a.FunctionName = "", "", "kv.put"
		a.Result = rtfs.Int(v.AsInt() + 1)
		a.KV = []KVWrite{{Key: "user/n", Value: a.Result}}
		if _, err := s.Append(ctx, a); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}

// TestKVCounterSurvivesKills kills the counting child with SIGKILL at
// random moments; after each kill the counter equals the number of
// increments on the chain.
func TestKVCounterSurvivesKills(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := filepath.Join(t.TempDir(), "store")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	for round := range 8 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKVCounterChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), kvChildEnv+"="+dir)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(50+rng.IntN(200)) * time.Millisecond)
		cmd.Process.Kill()
		_ = cmd.Wait() // "signal: killed" is the expected outcome
		if _, err := os.Stat(filepath.Join(dir, dataDir, "MANIFEST")); errors.Is(err, fs.ErrNotExist) {
			continue // killed before Badger made its manifest: nothing was committed (a writer opens it as new)
		}
		s, err := Open(Options{Dir: dir, ReadOnly: true})
		var notYet *NotStoreError
		if errors.As(err, &notYet) {
			continue // killed before it made the store
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		v, _, err := s.KV().Get(context.Background(), "user/n")
		calls := s.Head().Seq
		s.Close()
		if err != nil || uint64(v.AsInt()) != calls {
			t.Fatalf("round %d: the counter is %v (%v) but the chain holds %d increments", round, v, err, calls)
		}
		t.Logf("round %d: %d increments", round, calls)
	}
}
