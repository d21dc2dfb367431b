package ledger

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestAppendDeferredSharesCommitsInOrder(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	ctx := context.Background()
	sub := s.Subscribe(ctx, 1)
	var pend []*Pending
	var acts []*Action
	for i := range 10 {
		a := sample(i)
		a.ActionID, a.ParentActionID = "", ""
		p, err := s.AppendDeferred(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if a.ActionID == "" {
			t.Fatal("AppendDeferred returned without an action_id")
		}
		pend, acts = append(pend, p), append(acts, a)
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if h := s.Head().Seq; h != 10 {
		t.Fatalf("head after Sync is %d, want 10", h)
	}
	checkpoints := map[uint64]bool{}
	for i, p := range pend {
		r, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Seq != uint64(i+1) || acts[i].Seq != r.Seq {
			t.Fatalf("append %d committed as seq %d (action says %d), want %d", i, r.Seq, acts[i].Seq, i+1)
		}
		checkpoints[r.CheckpointSeq] = true
	}
	if len(checkpoints) == 10 {
		t.Error("ten deferred appends made back to back took ten commits; they should share")
	}
	for i := range 10 {
		got := <-sub
		if got.ActionID != acts[i].ActionID || got.Seq != uint64(i+1) {
			t.Fatalf("subscriber got %s seq %d as #%d, want %s", got.ActionID, got.Seq, i+1, acts[i].ActionID)
		}
	}
	mustVerify(t, s)
}

func TestSyncWithNothingPendingCommitsNothing(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h := s.Head().Seq; h != 0 {
		t.Fatalf("head after an empty Sync is %d, want 0", h)
	}
}

func TestSyncReportsAFailedDeferredAppend(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	ctx := context.Background()
	appendN(t, s, 0, 1)
	dup := sample(0) // its action_id is stored already
	p, err := s.AppendDeferred(ctx, dup)
	if err != nil {
		t.Fatal(err)
	}
	var de *DuplicateError
	if _, err := p.Wait(ctx); !errors.As(err, &de) {
		t.Fatalf("Wait = %v, want a DuplicateError", err)
	}
	if err := s.Sync(ctx); !errors.As(err, &de) || !strings.Contains(err.Error(), "deferred append failed") {
		t.Fatalf("Sync = %v, want the deferred append's DuplicateError", err)
	}
}

func TestCloseCommitsDeferredAppends(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	s := openDir(t, dir, true)
	for i := range 5 {
		if _, err := s.AppendDeferred(context.Background(), sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDir(t, dir, true)
	defer s.Close()
	if rep := mustVerify(t, s); rep.Actions != 5 {
		t.Fatalf("%d actions after Close, want 5", rep.Actions)
	}
}

const deferCrashEnv = "RALPH_LEDGER_DEFER_CRASH_CHILD_DIR"

// TestDeferredCrashChild is the child of TestDeferredCrashKeepsAPrefix: it
// appends deferred actions numbered 0, 1, 2, … (FunctionName) under its own
// run id, syncs after every fourth, and reports on fd 3 the last number
// each Sync made durable, until it is killed.
func TestDeferredCrashChild(t *testing.T) {
	dir := os.Getenv(deferCrashEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestDeferredCrashKeepsAPrefix")
	}
	acks := os.NewFile(3, "acks")
	s, err := Open(Options{Dir: dir, SyncWrites: true, MemTableSize: 8 << 20})
	if err != nil {
		fmt.Fprintf(acks, "open failed: %v\n", err)
		os.Exit(2)
	}
	ctx := context.Background()
	run := fmt.Sprintf("child-%d", os.Getpid())
	for i := 0; ; i++ {
		a := sample(i)
		a.ActionID, a.ParentActionID, a.RunID, a.FunctionName = "", "", run, strconv.Itoa(i)
		if _, err := s.AppendDeferred(ctx, a); err != nil {
			fmt.Fprintf(acks, "append failed: %v\n", err)
			os.Exit(2)
		}
		if i%4 == 3 {
			if err := s.Sync(ctx); err != nil {
				fmt.Fprintf(acks, "sync failed: %v\n", err)
				os.Exit(2)
			}
			fmt.Fprintf(acks, "%s %d\n", run, i)
		}
	}
}

// TestDeferredCrashKeepsAPrefix kills a child that appends deferred actions
// at random moments, between its appends and their Sync. After each kill
// the store opens and verifies, and each child's actions on it are a
// prefix of what it appended, in order, holding at least everything a
// Sync acknowledged: a lost tail never leaves a hole before what follows.
func TestDeferredCrashKeepsAPrefix(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns 8 processes")
	}
	dir := filepath.Join(t.TempDir(), "store")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	synced := map[string]int{}
	for round := range 8 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDeferredCrashChild$", "-test.count=1")
		// crashEnv keeps TestMain from giving the child a home of its own:
		// it signs with the key in ours.
		cmd.Env = append(os.Environ(), deferCrashEnv+"="+dir, crashEnv+"="+dir)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.ExtraFiles = []*os.File{w}
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		first := make(chan struct{})
		read := make(chan []string)
		go func() {
			var lines []string
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				if lines = append(lines, sc.Text()); len(lines) == 1 {
					close(first)
				}
			}
			read <- lines
		}()
		select {
		case <-first:
		case <-time.After(time.Minute):
			t.Error("the child acknowledged nothing for a minute")
		}
		time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		lines := <-read
		r.Close()
		for _, l := range lines {
			run, n, ok := strings.Cut(l, " ")
			i, err := strconv.Atoi(n)
			if !ok || err != nil {
				t.Fatalf("round %d: child said %q", round, l)
			}
			synced[run] = max(synced[run], i)
		}

		s := openDir(t, dir, true)
		mustVerify(t, s)
		next := map[string]int{}
		err = s.Range(1, func(a Action) error {
			if want := next[a.RunID]; a.FunctionName != strconv.Itoa(want) {
				return fmt.Errorf("run %s: seq %d holds append %s, want %d", a.RunID, a.Seq, a.FunctionName, want)
			}
			next[a.RunID]++
			return nil
		})
		if cerr := s.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for run, i := range synced {
			if next[run] <= i {
				t.Fatalf("round %d: run %s has %d actions on the store, but a Sync acknowledged append %d", round, run, next[run], i)
			}
		}
		t.Logf("round %d: killed after %d syncs", round, len(lines))
	}
}
