package ledger

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	seq := 0
	for seq < minSeq && sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "%d", &seq); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child: %s", sc.Text())
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // "signal: killed" is the expected outcome
	if seq < minSeq {
		t.Fatalf("the child completed iterations only up to seq %d", seq)
	}
	return dir, witness
}

// copyStore copies a store into a fresh directory (in Go: a forked cp
// would share the file locks other tests hold).
func copyStore(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
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
// ends an iteration or a run, not only Close.
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
		if got := witnessed(); got != tc.want {
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
			_, verr := s.VerifyWith(context.Background(), VerifyOptions{Since: []SavedCheckpoint{{Name: "W", Note: mustRead(t, WitnessPath(wd, s.ID()))}}})
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
