package ledger

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const crashEnv = "RALPH_LEDGER_CRASH_CHILD_DIR"

// TestCrashChild is the child process of TestCrashRecovery: it appends in a
// loop from several goroutines and reports every acknowledged append as
// "seq action_id" on file descriptor 3, until it is killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestCrashRecovery")
	}
	acks := os.NewFile(3, "acks")
	s, err := Open(Options{Dir: dir, SyncWrites: true, MemTableSize: 8 << 20})
	if err != nil {
		fmt.Fprintf(acks, "open failed: %v\n", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				a := sample(i)
				a.ActionID = "" // a fresh UUIDv7 each time
				a.ParentActionID = ""
				a.RunID = fmt.Sprintf("child-%d-%d", os.Getpid(), w)
				r, err := s.Append(context.Background(), a)
				if err != nil {
					fmt.Fprintf(acks, "append failed: %v\n", err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintf(acks, "%d %s\n", r.Seq, a.ActionID)
				mu.Unlock()
			}
		})
	}
	time.Sleep(30 * time.Second) // the parent kills long before
	os.Exit(3)
}

// TestCrashRecovery kills an appending child with SIGKILL 20 times at random
// moments. After every kill the store must open, verify, have no gap, and
// hold every append the child saw acknowledged.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns 20 processes")
	}
	dir := filepath.Join(t.TempDir(), "store")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	acked := map[uint64]string{}
	var maxAcked uint64
	for round := range 20 {
		// Even rounds kill at a random moment after the first acknowledged
		// append, odd ones at a random moment from the start (during Open,
		// on a loaded machine), so both kinds of crash are exercised.
		lines := runAndKill(t, dir, time.Duration(rng.IntN(300))*time.Millisecond, round%2 == 0)
		for _, line := range lines {
			seqText, id, ok := strings.Cut(line, " ")
			seq, err := strconv.ParseUint(seqText, 10, 64)
			if !ok || err != nil {
				t.Fatalf("round %d: child said %q", round, line)
			}
			acked[seq] = id
			maxAcked = max(maxAcked, seq)
		}
		s, err := Open(Options{Dir: dir, MemTableSize: 8 << 20})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		rep, err := s.Verify(context.Background(), nil)
		if err != nil {
			s.Close()
			t.Fatalf("round %d: verify after SIGKILL: %v", round, err)
		}
		if h := s.Head().Seq; h < maxAcked || rep.Actions != h {
			s.Close()
			t.Fatalf("round %d: head %d, %d actions, but seq %d was acknowledged", round, h, rep.Actions, maxAcked)
		}
		for seq, id := range acked {
			a, err := s.GetSeq(seq)
			if err != nil || a.ActionID != id {
				s.Close()
				t.Fatalf("round %d: acknowledged seq %d (%s) reads back as %q, %v", round, seq, id, a.ActionID, err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: killed after %d acks; %d actions verified", round, len(lines), rep.Actions)
	}
	if maxAcked == 0 {
		t.Fatal("the child never acknowledged an append")
	}
}

// runAndKill starts the child on dir, SIGKILLs it after d (counted from its
// first acknowledged append when afterFirstAck is set), and returns the
// acknowledgements it wrote before dying.
func runAndKill(t *testing.T, dir string, d time.Duration, afterFirstAck bool) []string {
	t.Helper()
	cmd, r := startCrashChild(t, dir)
	defer r.Close()
	var lines []string
	read := make(chan struct{})
	first := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if lines = append(lines, sc.Text()); len(lines) == 1 {
				close(first)
			}
		}
	}()
	if afterFirstAck {
		select {
		case <-first:
		case <-read: // the child ended; its output says why
		case <-time.After(time.Minute):
			t.Error("the child acknowledged nothing for a minute")
		}
	}
	time.Sleep(d)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // "signal: killed" is the expected outcome
	<-read
	for _, l := range lines {
		if strings.Contains(l, "failed") {
			t.Fatalf("child: %s", l)
		}
	}
	return lines
}

// startCrashChild starts TestCrashChild on dir, its output on our stderr,
// and returns it with the read end of its acknowledgements.
func startCrashChild(t *testing.T, dir string) (*exec.Cmd, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	return cmd, r
}

// TestSecondProcessIsNamed opens a store another process holds.
func TestSecondProcessIsNamed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := filepath.Join(t.TempDir(), "store")
	cmd, r := startCrashChild(t, dir)
	defer r.Close()
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if !bufio.NewScanner(r).Scan() { // the child has the store open once it acknowledges
		t.Fatal("the child never acknowledged an append")
	}
	_, err := Open(Options{Dir: dir})
	want := fmt.Sprintf("ledger store %s is in use by process %d; stop that process or pass another --store", dir, cmd.Process.Pid)
	if err == nil || err.Error() != want {
		t.Fatalf("open = %v\nwant %s", err, want)
	}
}

// A process killed between creating a value log or a memtable log and
// sizing it leaves an empty file behind; Badger alone then refuses to open
// the store. The ledger removes it and opens with every action intact.
func TestOpenAfterCrashLeftAnEmptyLogFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ ext, format string }{{".vlog", "%06d.vlog"}, {".mem", "%05d.mem"}} {
		t.Run(tc.ext, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := openDir(t, dir, true)
			appendN(t, s, 0, 10)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join(dir, dataDir, "*"+tc.ext))
			newest := 0
			for _, f := range files {
				n, _ := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), tc.ext))
				newest = max(newest, n)
			}
			empty := filepath.Join(dir, dataDir, fmt.Sprintf(tc.format, newest+1))
			if err := os.WriteFile(empty, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := Open(Options{Dir: dir})
			if err != nil {
				t.Fatalf("open with an empty %s file left by a crash: %v", tc.ext, err)
			}
			defer s.Close()
			if r := mustVerify(t, s); r.Actions != 10 {
				t.Errorf("verified %d actions, want 10", r.Actions)
			}
			appendN(t, s, 10, 5) // and it takes new writes
		})
	}
}

// A process killed after sizing a memtable log but before writing its
// header leaves a log of zeros: a reader opens the store and sees every
// action, and so does a writer.
func TestOpenAfterCrashLeftALogOfZeros(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openDir(t, dir, true)
	appendN(t, s, 0, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, dataDir, "00009.mem"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{true, false} {
		s, err := Open(Options{Dir: dir, ReadOnly: ro, MemTableSize: 8 << 20})
		if err != nil {
			t.Fatalf("open (read-only %v) with a log of zeros: %v", ro, err)
		}
		if r := mustVerify(t, s); r.Actions != 10 {
			t.Errorf("read-only %v: verified %d actions, want 10", ro, r.Actions)
		}
		s.Close()
	}
}
