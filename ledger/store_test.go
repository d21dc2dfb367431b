package ledger

import (
	"context"
	"crypto/ed25519"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/google/go-cmp/cmp"
	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/rtfs"
)

func TestAppendAndGet(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	a := sample(1)
	r, err := s.Append(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != 1 || r.CheckpointSeq != 1 || a.Seq != 1 || a.ChainHash != r.ChainHash {
		t.Fatalf("receipt %+v, action seq %d", r, a.Seq)
	}
	if want := ChainLink(Hash{}, ComputeActionHash(a), 1); r.ChainHash != want || r.ActionHash != ComputeActionHash(a) {
		t.Fatalf("hashes do not follow the spec: %+v", r)
	}
	got, err := s.Get(a.ActionID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*a, got, cmpActions); diff != "" {
		t.Fatalf("Get (-appended +got):\n%s", diff)
	}
	if h := s.Head(); h.Seq != 1 || h.ChainHash != r.ChainHash {
		t.Fatalf("head %+v", h)
	}
	if _, err := s.Get("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get unknown = %v, want ErrNotFound", err)
	}
}

func TestAppendFillsIDAndTime(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	a := &Action{Type: RunStarted, FunctionName: "run"}
	if _, err := s.Append(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if len(a.ActionID) != 36 || a.Timestamp.IsZero() {
		t.Fatalf("id %q time %v", a.ActionID, a.Timestamp)
	}
	// The caller's later changes do not reach the ledger.
	m := map[string]rtfs.Value{"k": rtfs.Int(1)}
	b := &Action{Type: RunStarted, Metadata: m}
	if _, err := s.Append(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	m["k"] = rtfs.Int(2)
	got, _ := s.Get(b.ActionID)
	if got.Metadata["k"].AsInt() != 1 {
		t.Fatal("the ledger shares the caller's metadata map")
	}
}

func TestAppendRefusesBadActions(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	ctx := context.Background()
	if _, err := s.Append(ctx, sample(1)); err != nil {
		t.Fatal(err)
	}
	var dup *DuplicateError
	if _, err := s.Append(ctx, sample(1)); !errors.As(err, &dup) || dup.ActionID != sample(1).ActionID {
		t.Fatalf("duplicate = %v", err)
	}
	if _, err := s.Append(ctx, &Action{ActionID: "x"}); err == nil || !strings.Contains(err.Error(), "action_type") {
		t.Fatalf("no type = %v", err)
	}
	big := sample(2)
	big.Result = rtfs.String(strings.Repeat("x", 3<<20))
	var tl *TooLargeError
	_, err := s.Append(ctx, big)
	if !errors.As(err, &tl) || tl.Size <= tl.Limit {
		t.Fatalf("too large = %v", err)
	}
	if !strings.Contains(err.Error(), strconv.FormatInt(tl.Size, 10)) || !strings.Contains(err.Error(), strconv.FormatInt(tl.Limit, 10)) {
		t.Fatalf("message should give size and limit: %v", err)
	}
	// Nothing refused took a seq.
	r, err := s.Append(ctx, sample(3))
	if err != nil || r.Seq != 2 {
		t.Fatalf("next append = %+v, %v", r, err)
	}
	mustVerify(t, s)
}

func TestLargestActionFits(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	a := sample(1)
	a.Result = rtfs.String(strings.Repeat("y", 900<<10)) // under the 1 MiB a value may take in memory
	if _, err := s.Append(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(a.ActionID)
	if err != nil || got.Result.Len() != 900<<10 {
		t.Fatalf("got %d bytes, %v", got.Result.Len(), err)
	}
}

func TestPersistenceAcrossReopen(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	s := openDir(t, dir, true)
	first := appendN(t, s, 0, 50)
	pub := s.PublicKey()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Append(context.Background(), sample(99)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close = %v", err)
	}
	if _, err := s.Get("act-000001"); !errors.Is(err, ErrClosed) {
		t.Fatalf("get after close = %v", err)
	}

	s = openDir(t, dir, true)
	defer s.Close()
	if !slices.Equal(pub, s.PublicKey()) {
		t.Fatal("the signing key changed across reopen")
	}
	if h := s.Head(); h.Seq != 50 || h.ChainHash != first[49].ChainHash {
		t.Fatalf("head after reopen %+v", h)
	}
	more := appendN(t, s, 50, 10)
	if more[0].Seq != 51 {
		t.Fatalf("seq after reopen %d", more[0].Seq)
	}
	rep := mustVerify(t, s)
	if rep.Actions != 60 || rep.Checkpoints != 60 {
		t.Fatalf("report %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(dir, "keys")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the store keeps a keys directory: %v", err)
	}
	kd, err := DefaultKeyDir()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := StoreKeyPath(kd, s.ID())
	if s.KeyPath() != keyFile {
		t.Fatalf("key read from %s, want %s", s.KeyPath(), keyFile)
	}
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key file: %v", err)
	}
	if _, pub, err := ParseVerifierKey(s.VerifierKeyString()); err != nil || !slices.Equal(pub, s.PublicKey()) {
		t.Fatalf("recorded verifier key %q: %v", s.VerifierKeyString(), err)
	}
}

func TestConcurrentAppendsAreGapFree(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	const writers, each = 16, 200
	var wg sync.WaitGroup
	seqs := make([][]uint64, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				r, err := s.Append(context.Background(), sample(w*each+i))
				if err != nil {
					t.Error(err)
					return
				}
				seqs[w] = append(seqs[w], r.Seq)
			}
		})
	}
	wg.Wait()
	var all []uint64
	for w, ws := range seqs {
		if !slices.IsSorted(ws) {
			t.Errorf("writer %d saw seqs out of order", w)
		}
		all = append(all, ws...)
	}
	slices.Sort(all)
	for i, seq := range all {
		if seq != uint64(i+1) {
			t.Fatalf("seq %d at position %d: not gap-free", seq, i)
		}
	}
	rep := mustVerify(t, s)
	if rep.Actions != writers*each || rep.Checkpoints >= writers*each {
		t.Fatalf("report %+v: want %d actions in fewer commits", rep, writers*each)
	}
}

func TestIndexesAgreeWithFullScan(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	appendN(t, s, 0, 120)
	var all []Action
	if err := s.Range(1, func(a Action) error { all = append(all, a); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(all) != 120 {
		t.Fatalf("range gave %d", len(all))
	}
	group := func(key func(Action) string) map[string][]uint64 {
		m := map[string][]uint64{}
		for _, a := range all {
			if k := key(a); k != "" {
				m[k] = append(m[k], a.Seq)
			}
		}
		return m
	}
	seqsOf := func(as []Action, err error) []uint64 {
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, a := range as {
			out = append(out, a.Seq)
		}
		return out
	}
	for name, tc := range map[string]struct {
		key   func(Action) string
		query func(string) ([]Action, error)
	}{
		"plan":     {func(a Action) string { return a.PlanID }, s.ByPlan},
		"intent":   {func(a Action) string { return a.IntentID }, s.ByIntent},
		"run":      {func(a Action) string { return a.RunID }, s.ByRun},
		"children": {func(a Action) string { return a.ParentActionID }, s.Children},
	} {
		for id, want := range group(tc.key) {
			if got := seqsOf(tc.query(id)); !slices.Equal(got, want) {
				t.Errorf("%s %s: index gives %v, scan gives %v", name, id, got, want)
			}
		}
	}
	for _, a := range all {
		got, err := s.Get(a.ActionID)
		if err != nil || got.Seq != a.Seq {
			t.Fatalf("Get(%s) = %d, %v", a.ActionID, got.Seq, err)
		}
		p, ok, err := s.Parent(a.ActionID)
		switch {
		case err != nil:
			t.Fatal(err)
		case a.ParentActionID == "" && ok:
			t.Errorf("%s has no parent but Parent found %s", a.ActionID, p.ActionID)
		case a.ParentActionID != "" && (!ok || p.ActionID != a.ParentActionID):
			t.Errorf("Parent(%s) = %s, %v", a.ActionID, p.ActionID, ok)
		}
	}
	// An id that is a prefix of another (with '/') does not leak into it.
	ctx := context.Background()
	for _, id := range []string{"x", "x/y"} {
		a := sample(1000)
		a.ActionID, a.PlanID = "id-"+id, id
		if _, err := s.Append(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := s.ByPlan("x"); len(got) != 1 || got[0].PlanID != "x" {
		t.Fatalf("ByPlan(x) = %d actions", len(got))
	}
}

func TestSecondOpenNamesTheHolder(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	s := openDir(t, dir, false)
	defer s.Close()
	_, err := Open(Options{Dir: dir})
	var le *LockedError
	if !errors.As(err, &le) || le.PID != os.Getpid() {
		t.Fatalf("second open = %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, dir) || !strings.Contains(msg, "process") || strings.Count(msg, "\n") != 0 {
		t.Fatalf("message %q should be one sentence naming %s and the pid", msg, dir)
	}
}

func TestForeignAndCorruptedDirectories(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644)
	_, err := Open(Options{Dir: foreign})
	if err == nil || !strings.Contains(err.Error(), "is not a ralph ledger store") {
		t.Fatalf("foreign dir = %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(foreign, "notes.txt")); string(b) != "mine" {
		t.Fatal("the foreign directory was touched")
	}

	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	if _, err := Open(Options{Dir: file}); err == nil || !strings.Contains(err.Error(), "is a file") {
		t.Fatalf("file = %v", err)
	}

	corrupt := filepath.Join(t.TempDir(), "store")
	s := openDir(t, corrupt, true)
	appendN(t, s, 0, 5)
	s.Close()
	manifest := filepath.Join(corrupt, dataDir, "MANIFEST")
	if err := os.WriteFile(manifest, []byte("this is not a manifest at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Dir: corrupt})
	if err == nil || !strings.Contains(err.Error(), "corrupted") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("corrupted = %v", err)
	}

	// A head that does not match the stored actions is caught at open: the
	// store opens for reading and Verify but refuses appends.
	headless := filepath.Join(t.TempDir(), "store")
	s = openDir(t, headless, true)
	appendN(t, s, 0, 3)
	s.Close()
	rawUpdate(t, headless, func(txn *badger.Txn) error { return txn.Delete([]byte(keyHead)) })
	s = openDir(t, headless, true)
	defer s.Close()
	if _, err := s.Append(ctx, sample(9)); err == nil || !strings.Contains(err.Error(), "no head record") {
		t.Fatalf("append to a headless store = %v", err)
	}
	var ie *IntegrityError
	if _, err := s.Verify(ctx, nil); !errors.As(err, &ie) || ie.Seq != 3 {
		t.Fatalf("verify headless = %v", err)
	}
	if got, err := s.GetSeq(2); err != nil || got.ActionID != sample(1).ActionID {
		t.Fatalf("reads still work: %v", err)
	}
}

func TestInMemoryWithGivenKey(t *testing.T) {
	t.Parallel()
	_, priv, _ := ed25519.GenerateKey(nil)
	s, err := Open(Options{InMemory: true, PrivateKey: priv, MemTableSize: 8 << 20, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !slices.Equal(s.PublicKey(), priv.Public().(ed25519.PublicKey)) {
		t.Fatal("the given key is not used")
	}
	if _, err := Open(Options{}); err == nil {
		t.Fatal("Open without Dir or InMemory must fail")
	}
}

func TestCloseWaitsForPendingAppends(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := 0
	for w := range 8 {
		wg.Go(func() {
			for i := range 100 {
				if _, err := s.Append(context.Background(), sample(w*100+i)); err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Error(err)
					}
					return
				}
				mu.Lock()
				acked++
				mu.Unlock()
			}
		})
	}
	for s.Head().Seq < 50 {
		<-s.commitSignal()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if h := s.Head().Seq; uint64(acked) != h {
		t.Fatalf("%d appends acknowledged but head is %d", acked, h)
	}
}

// rawUpdate opens the store's Badger directly, as an attacker would.
func rawUpdate(t testing.TB, dir string, fn func(txn *badger.Txn) error) {
	t.Helper()
	// openBadger waits out a lock that a child forked by another test
	// still shares for a moment after the store closed.
	db, err := openBadger(badger.DefaultOptions(filepath.Join(dir, dataDir)).WithLogger(nil).WithMemTableSize(8<<20), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// recordingHandler keeps the records logged through it.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func TestBadgerLogsGoToSlogAndGCStopsOnClose(t *testing.T) {
	t.Parallel()
	h := &recordingHandler{}
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Open(Options{Dir: dir, Logger: slog.New(h), GCInterval: time.Millisecond, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, s, 0, 10)
	eventually.True(t, "three value-log GC passes", func() bool { return s.gcPasses.Load() >= 3 })
	if n := s.gcLoops.Load(); n != 1 {
		t.Fatalf("%d value-log GC loops run before Close, want 1", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Only a GC loop counts a pass, and none is left: GC cannot run again.
	if n := s.gcLoops.Load(); n != 0 {
		t.Errorf("%d value-log GC loops still run after Close", n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	badgerLines := 0
	for _, r := range h.records {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "component" && a.Value.String() == "badger" {
				badgerLines++
				if r.Level > slog.LevelWarn || strings.Contains(r.Message, "\n") {
					t.Errorf("badger message at %v: %q", r.Level, r.Message)
				}
			}
			return true
		})
	}
	if badgerLines == 0 {
		t.Fatal("no Badger message reached the slog handler")
	}
}

func TestConcurrentDuplicatesOneWins(t *testing.T) {
	t.Parallel()
	s := newMemStore(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, dups := 0, 0
	for range 8 {
		wg.Go(func() {
			_, err := s.Append(context.Background(), sample(5))
			var dup *DuplicateError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.As(err, &dup):
				dups++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || dups != 7 {
		t.Fatalf("%d appends of one id succeeded, %d refused", wins, dups)
	}
	// A refused request does not poison its id's neighbours in the batch.
	if _, err := s.Append(context.Background(), sample(6)); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, s)
}
