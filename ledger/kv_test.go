package ledger

import (
	"context"
	"os"
	"path/filepath"
	"testing"

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
