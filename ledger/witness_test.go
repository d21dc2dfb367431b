package ledger

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/eventually"
)

const loopChildEnv = "RALPH_LEDGER_LOOP_CHILD_DIR"

// TestLoopChild is the child process of killedLoopStore: it records
// iterations (IterationStarted, three calls, IterationCompleted) with a
// witness directory, as a run does, and reports each completed iteration's
// seq on file descriptor 3 until it is killed.
func TestLoopChild(t *testing.T) {
	dir := os.Getenv(loopChildEnv)
	if dir == "" {
		t.Skip("runs only as the child of a witness test")
	}
	acks := os.NewFile(3, "acks")
	s, err := Open(Options{Dir: dir, MemTableSize: 8 << 20, WitnessDir: os.Getenv(loopChildEnv + "_WITNESS"),
		KeyDir: filepath.Join(filepath.Dir(dir), "keys")})
	if err != nil {
		fmt.Fprintf(acks, "open failed: %v\n", err)
		os.Exit(2)
	}
	for i := 0; ; i++ {
		for j, typ := range []ActionType{IterationStarted, CapabilityCall, CapabilityCall, CapabilityCall, IterationCompleted} {
			a := sample(i*5 + j)
			a.ActionID, a.ParentActionID, a.Type = "", "", typ
			r, err := s.Append(context.Background(), a)
			if err != nil {
				fmt.Fprintf(acks, "append failed: %v\n", err)
				os.Exit(2)
			}
			if typ == IterationCompleted {
				// As a run's iteration takes longer than the witness's
				// fsyncs: ack once the witness has caught up.
				for witnessedSeq(s, os.Getenv(loopChildEnv+"_WITNESS")) < r.Seq {
					time.Sleep(time.Millisecond)
				}
				fmt.Fprintf(acks, "%d\n", r.Seq)
			}
		}
	}
}

// killedLoopStore runs TestLoopChild on a new store until it has completed
// iterations past minSeq, kills it with SIGKILL, and returns the store and
// witness directories. Its key is in the directory keys beside them.
func killedLoopStore(t *testing.T, minSeq int) (dir, witness string) {
	t.Helper()
	root := t.TempDir()
	dir, witness = filepath.Join(root, "store"), filepath.Join(root, "witness")
	runLoopChild(t, dir, witness, minSeq)
	return dir, witness
}

// runLoopChild runs TestLoopChild on dir until it has completed iterations
// past minSeq more actions, and kills it with SIGKILL.
func runLoopChild(t *testing.T, dir, witness string, minSeq int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoopChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), loopChildEnv+"="+dir, loopChildEnv+"_WITNESS="+witness)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(r)
	first, seq := -1, 0
	for (first < 0 || seq-first < minSeq) && sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "%d", &seq); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child: %s", sc.Text())
		}
		if first < 0 {
			first = seq
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // "signal: killed" is the expected outcome
	if first < 0 || seq-first < minSeq {
		t.Fatalf("the child completed iterations only up to seq %d", seq)
	}
}

// copyStore copies a store into a fresh directory (in Go: a forked cp
// would share the file locks other tests hold).
func copyStore(t *testing.T, src string) string {
	t.Helper()
	return copyStoreUsed(t, src, nil)
}

// copyStoreUsed is copyStore for a store whose files hold only zeros past
// used[name] (a log's preallocated room): that part is left a hole.
func copyStoreUsed(t *testing.T, src string, used map[string]int64) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		n, ok := used[strings.Replace(path, src, "", 1)]
		if !ok {
			n = -1
		}
		return copyPrefixSparse(path, filepath.Join(dst, rel), n)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// copyPrefixSparse copies src's first n bytes (all of it when n < 0) and
// gives the copy src's size.
func copyPrefixSparse(src, dst string, n int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if n < 0 {
		n = fi.Size()
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.LimitReader(in, n)); err != nil {
		out.Close()
		return err
	}
	if err := out.Truncate(fi.Size()); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// usedEnd is one past the last byte of path that is not zero.
func usedEnd(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(bytes.TrimRight(b, "\x00")))
}

// TestWitnessAdvancesAtIterationEnd: the witness follows every commit that
// ends an iteration or a run, not only Close, and no other.
func TestWitnessAdvancesAtIterationEnd(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	wd := filepath.Join(root, "witness")
	s, err := Open(Options{Dir: filepath.Join(root, "store"), MemTableSize: 8 << 20, WitnessDir: wd})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	witnessed := func() uint64 {
		b, err := ReadWitness(wd, s.ID())
		if err != nil || b == nil {
			return 0
		}
		nv, _, _ := ParseVerifierKey(s.VerifierKeyString())
		cp, err := OpenCheckpoint(b, nv)
		if err != nil {
			t.Fatalf("the witness does not verify: %v", err)
		}
		return cp.Seq
	}
	for i, tc := range []struct {
		typ  ActionType
		want uint64 // the witnessed seq after appending
	}{
		{IterationStarted, 0}, {CapabilityCall, 0}, {IterationCompleted, 3},
		{IterationStarted, 3}, {CapabilityCall, 3}, {RunFailed, 6}, {CapabilityCall, 6},
	} {
		a := sample(i)
		a.ParentActionID, a.Type = "", tc.typ
		if _, err := s.Append(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		// The end of a run is witnessed before Append returns; the end of an
		// iteration just after, by the witness goroutine.
		got := witnessed()
		if tc.typ == IterationCompleted {
			eventually.Poll(func() bool { got = witnessed(); return got == tc.want })
		}
		if got != tc.want {
			t.Fatalf("after appending %s (seq %d) the witness signs seq %d, want %d", tc.typ, i+1, got, tc.want)
		}
	}
}

// TestDamagedLogIsNamedNotLost damages the memtable log of a killed loop's
// store (a flipped byte, a cut) and checks that the loss is named and the
// evidence kept: verify fails naming the witnessed count, a writer's open
// refuses to write, and the log is left as it was. Each trial runs on a
// fresh copy.
func TestDamagedLogIsNamedNotLost(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns a process")
	}
	src, wd := killedLoopStore(t, 300)
	mems, _ := filepath.Glob(filepath.Join(src, dataDir, "*.mem"))
	var mem string
	for _, m := range mems {
		if usedEnd(t, m) > 10<<10 {
			mem = filepath.Base(m)
		}
	}
	if mem == "" {
		t.Fatalf("the killed store has no memtable log with its actions: %v", mems)
	}
	end := usedEnd(t, filepath.Join(src, dataDir, mem))
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"flip at a third", func(b []byte) []byte { b[end/3] ^= 0x01; return b }},
		{"flip at a half", func(b []byte) []byte { b[end/2] ^= 0x40; return b }},
		{"cut to a quarter", func(b []byte) []byte { return b[:end/4] }},
		{"cut to a half", func(b []byte) []byte { return b[:end/2] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyStore(t, src)
			path := filepath.Join(dir, dataDir, mem)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			damaged := tc.damage(b)
			if err := os.WriteFile(path, damaged, 0o644); err != nil {
				t.Fatal(err)
			}
			// A writer's open: read-only, refusing to write, naming the loss.
			s, err := Open(Options{Dir: dir, MemTableSize: 8 << 20, WitnessDir: wd})
			if err != nil {
				t.Fatalf("open for writing: %v", err)
			}
			_, aerr := s.Append(context.Background(), sample(1))
			var behind *BehindError
			if !errors.As(aerr, &behind) || !strings.Contains(aerr.Error(), "refuses to write") {
				s.Close()
				t.Fatalf("append on a store behind its witness = %v", aerr)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, damaged) {
				t.Fatalf("opening the damaged store changed %s", mem)
			}
			// chain verify's view names it.
			s, err = Open(Options{Dir: dir, ReadOnly: true})
			if err != nil {
				t.Fatalf("open read-only: %v", err)
			}
			_, verr := s.VerifyWith(context.Background(), VerifyOptions{Since: []SavedCheckpoint{{Name: "W", Note: mustReadWitness(t, wd, s.ID())}}})
			s.Close()
			want := fmt.Sprintf("witnessed %s", thousands(behind.Witnessed))
			if verr == nil || !strings.Contains(verr.Error(), want) || !strings.Contains(verr.Error(), "restore a copy") && !strings.Contains(verr.Error(), "rolled back") {
				t.Fatalf("verify = %v, want it to name the loss (%s)", verr, want)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, damaged) {
				t.Fatalf("verifying the damaged store changed %s", mem)
			}
			t.Logf("%s: %v", tc.name, verr)
		})
	}
	// The undamaged killed store opens for writing and goes on.
	s, err := Open(Options{Dir: copyStore(t, src), MemTableSize: 8 << 20, WitnessDir: wd, KeyDir: filepath.Join(filepath.Dir(src), "keys")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(context.Background(), sample(1)); err != nil {
		t.Fatalf("append on the undamaged killed store: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDamagedFilesOfAKilledStore flips bytes in and cuts every kind of
// file Badger keeps in a killed store (tables, manifest, key registry,
// logs), each trial on a fresh copy. Each trial must end in an error that
// names the file or the loss, or in a store that verifies and still holds
// every witnessed action: never a panic, never a silent pass.
func TestDamagedFilesOfAKilledStore(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns a process")
	}
	root := t.TempDir()
	dir, wd, keys := filepath.Join(root, "store"), filepath.Join(root, "witness"), filepath.Join(root, "keys")
	// A first session that closes leaves a table; the loop killed after it
	// leaves its memtable log.
	s, err := Open(Options{Dir: dir, MemTableSize: 8 << 20, WitnessDir: wd, KeyDir: keys})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, s, 0, 200)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	runLoopChild(t, dir, wd, 400)
	entries, err := os.ReadDir(filepath.Join(dir, dataDir))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	usedOf := map[string]int64{}
	for _, e := range entries {
		p := filepath.Join(dir, dataDir, e.Name())
		usedOf[strings.Replace(p, root, "", 1)] = usedEnd(t, p)
	}
	rng := rand.New(rand.NewPCG(23, 18))
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || fi.Size() == 0 || e.Name() == "LOCK" {
			continue
		}
		name := e.Name()
		kind := strings.TrimLeft(filepath.Ext(name), ".") + strings.TrimSuffix(name, filepath.Ext(name))[:0]
		used := usedOf[strings.Replace(filepath.Join(dir, dataDir, name), root, "", 1)]
		if used == 0 || kinds[kind] {
			continue // one file of each kind is damaged
		}
		kinds[kind] = true
		type trial struct {
			what   string
			damage func(path string) error
		}
		var trials []trial
		seen := map[string]bool{}
		add := func(tr trial) {
			if !seen[tr.what] {
				seen[tr.what] = true
				trials = append(trials, tr)
			}
		}
		for _, off := range []int64{0, used / 3, used / 2, used - 1, rng.Int64N(used)} {
			add(trial{fmt.Sprintf("flip at %d", off), func(path string) error { return flipByte(path, off) }})
		}
		for _, n := range []int64{0, 10, used / 2} {
			add(trial{fmt.Sprintf("cut to %d", n), func(path string) error { return os.Truncate(path, n) }})
		}
		for _, tr := range trials {
			t.Run(name+"/"+tr.what, func(t *testing.T) {
				t.Parallel()
				// The store, its witness and its key, fresh for each trial.
				cp := copyStoreUsed(t, root, usedOf)
				if err := tr.damage(filepath.Join(cp, "store", dataDir, name)); err != nil {
					t.Fatal(err)
				}
				checkDamaged(t, filepath.Join(cp, "store"), filepath.Join(cp, "witness"), filepath.Join(cp, "keys"), name)
			})
		}
	}
	for _, k := range []string{"sst", "mem", "vlog", "MANIFEST"} {
		found := false
		for have := range kinds {
			found = found || strings.Contains(have, k)
		}
		if !found && k != "MANIFEST" {
			t.Errorf("the killed store has no %s file to damage (it has %v)", k, kinds)
		}
	}
}

// checkDamaged opens a damaged store for reading and verifies it, then for
// writing: each either fails naming file (or the loss), or holds every
// witnessed action and verifies.
func checkDamaged(t *testing.T, dir, wd, keys, file string) {
	t.Helper()
	named := func(err error) bool {
		m := err.Error()
		return strings.Contains(m, filepath.Join(dataDir, file)) || strings.Contains(m, "witnessed") || strings.Contains(m, "ledger verification failed")
	}
	s, err := Open(Options{Dir: dir, ReadOnly: true})
	if err != nil {
		t.Logf("read-only open: %v", err)
		if !named(err) {
			t.Errorf("read-only open fails without naming %s: %v", file, err)
		}
	} else {
		w, _ := ReadWitness(wd, s.ID())
		var since []SavedCheckpoint
		if w != nil {
			since = append(since, SavedCheckpoint{Name: "witness", Note: w})
		}
		_, verr := s.VerifyWith(context.Background(), VerifyOptions{Since: since})
		s.Close()
		t.Logf("verify: %v", verr)
		if verr != nil && !named(verr) {
			t.Errorf("verify fails without naming %s: %v", file, verr)
		}
		if verr == nil && w == nil {
			t.Errorf("verify passed with no witness to check against")
		}
	}
	s, err = Open(Options{Dir: dir, MemTableSize: 8 << 20, WitnessDir: wd, KeyDir: keys})
	if err != nil {
		if !named(err) {
			t.Errorf("open for writing fails without naming %s: %v", file, err)
		}
		return
	}
	defer s.Close()
	if _, err := s.Append(context.Background(), sample(99999)); err != nil {
		if !named(err) && !strings.Contains(err.Error(), "damaged") {
			t.Errorf("append fails without naming %s: %v", file, err)
		}
	}
}

// flipByte flips some bits of the byte at off of path, in place.
func flipByte(path string, off int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		f.Close()
		return err
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// witnessedSeq is the seq of the checkpoint witnessed for s in dir (0: none).
func witnessedSeq(s *Store, dir string) uint64 {
	b, err := ReadWitness(dir, s.ID())
	if err != nil || b == nil {
		return 0
	}
	nv, _, err := ParseVerifierKey(s.VerifierKeyString())
	if err != nil {
		return 0
	}
	cp, err := OpenCheckpoint(b, nv)
	if err != nil {
		return 0
	}
	return cp.Seq
}

// mustReadWitness returns the checkpoint witnessed for store id in dir.
func mustReadWitness(t *testing.T, dir, id string) []byte {
	t.Helper()
	b, err := ReadWitness(dir, id)
	if err != nil || b == nil {
		t.Fatalf("read the witness of %s: %v", id, err)
	}
	return b
}
