package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/testenv"
)

// A process that writes a lot and exits at once leaves every byte for the
// reader (a pipe loses what a CLI had not flushed when it exited), and the
// reader gets io.EOF only after finish.
func TestSpoolKeepsWhatAnExitingWriterWrote(t *testing.T) {
	t.Parallel()
	w, s, err := newSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const n = 24 << 20
	cmd := exec.Command("head", "-c", "25165824", "/dev/urandom")
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	h := sha256.New()
	done := make(chan int64, 1)
	go func() {
		got, _ := io.Copy(h, s)
		done <- got
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		t.Fatalf("the reader ended after %d bytes before finish", got)
	default:
	}
	s.finish()
	if got := <-done; got != n {
		t.Fatalf("read %d bytes, want %d", got, n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// What the spool has read is released from the disk as reading goes on (a
// punched hole, on Linux): a flood never holds more than a few MiB of disk.
// It failed while the reading descriptor was open read-only (EBADF).
func TestSpoolReleasesWhatItRead(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("holes are punched on Linux only")
	}
	w, s, err := newSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 3 * spoolRelease
	if _, err := w.Write(make([]byte, n)); err != nil { // zeros are written, not left sparse
		t.Fatal(err)
	}
	w.Close()
	s.finish()
	if got, _ := io.Copy(io.Discard, s); got != n {
		t.Fatalf("read %d bytes, want %d", got, n)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(s.r.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if s.noHoles {
		testenv.Need(t, "a temporary directory on a file system that punches holes (ext4, xfs, btrfs, tmpfs)")
	}
	if s.holeErr != nil {
		t.Fatalf("punching a hole failed: %v", s.holeErr)
	}
	if st.Size != n || st.Blocks*512 > n-2*spoolRelease {
		t.Errorf("after reading all %d bytes the file still takes %d bytes on disk; at most %d were to be left", st.Size, st.Blocks*512, n-2*spoolRelease)
	}
}

// Run reads a CLI's standard output through the spool: the bytes the
// parser saw are those the CLI wrote, in order, whole.
func TestRunReadsStandardOutputWhole(t *testing.T) {
	t.Parallel()
	var got bytes.Buffer
	o := Options{CLI: "command", Command: []string{"sh", "-c", "seq 1 200000"}, Dir: t.TempDir(),
		OnEvent: func(e Event) {
			if e.Kind == EventText {
				got.WriteString(e.Text)
				got.WriteByte('\n')
			}
		}}
	res, err := Run(t.Context(), o)
	if err != nil || res.Exit != 0 {
		t.Fatal(res, err)
	}
	want, _ := exec.Command("seq", "1", "200000").Output()
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("the parser saw %d bytes, want the %d seq printed", got.Len(), len(want))
	}
}

// Every byte the CLI printed is read after it exits, however long that
// takes (here the consumer of the first block of output holds the reader
// for longer than the 2 s the reading once got after the CLI exited): the
// read is bounded by the output's end and the call's own timeout, never by
// a shorter timer. A 2 s cut once recorded a 128 MiB output at 118–127 MB,
// its result line and cost lost.
func TestRunReadsSlowlyConsumedOutputWhole(t *testing.T) {
	t.Parallel()
	var got bytes.Buffer
	first := true
	o := Options{CLI: "command", Command: []string{"seq", "1", "200000"}, Dir: t.TempDir(),
		OnEvent: func(e Event) {
			if e.Kind != EventText {
				return
			}
			if first {
				first = false
				time.Sleep(2500 * time.Millisecond) // the CLI has exited by now
			}
			got.WriteString(e.Text)
			got.WriteByte('\n')
		}}
	res, err := Run(t.Context(), o)
	if err != nil || res.Exit != 0 {
		t.Fatal(res, err)
	}
	want, _ := exec.Command("seq", "1", "200000").Output()
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("the consumer saw %d bytes of %d", got.Len(), len(want))
	}
}

// A spool that cannot be made (its directory is not there, or not
// writable) is a SpoolError naming the directory and the fix, before
// the CLI starts.
func TestSpoolThatCannotBeMade(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "gone")
	o := Options{CLI: "command", Command: []string{"echo", "hi"}, Dir: t.TempDir(), spoolDir: dir}
	res, err := Run(t.Context(), o)
	var se *SpoolError
	if !errors.As(err, &se) || se.Ran || se.Dir != dir || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("err = %v (%T), want a SpoolError for %s", err, err, dir)
	}
	want := "the agent's standard output needs a file in " + dir + ", which could not be made (no such file or directory); set TMPDIR to a writable directory with room"
	if err.Error() != want || res.Exit != -1 {
		t.Errorf("exit %d, err:\n%s\nwant:\n%s", res.Exit, err, want)
	}
}

// mountTmpfs mounts a tmpfs of size (as mount takes it: "2m") on a new
// directory, unmounted at the end; without the right to mount one the
// test cannot run.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		testenv.Need(t, "a tmpfs it may mount (root)", fmt.Sprintf("mounting a %s tmpfs is not permitted here (%v: %s)", size, err, out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// When the spool's file system fills, the CLI's writes fail, which it
// may not say (or may say and go on): the call is ended with a
// SpoolError naming the directory and the disk, what was written before
// is read and recorded, and nothing waits for the timeout. Before, the
// output was recorded as whole, cut where the disk filled.
func TestSpoolOnAFullDisk(t *testing.T) {
	t.Parallel()
	dir := mountTmpfs(t, "2m")
	for _, tc := range []struct{ name, script string }{
		{"the cli dies of it", "yes 'a line of the flood' | head -c 16777216"},
		{"the cli goes on regardless", "while :; do echo 'a line of the flood' 2>/dev/null; done"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "call.out")
			o := Options{CLI: "command", Command: []string{"sh", "-c", tc.script}, Dir: t.TempDir(),
				Timeout: time.Minute, spoolDir: dir, OutputFile: out}
			res, err := Run(t.Context(), o)
			var se *SpoolError
			if !errors.As(err, &se) || !se.Ran || se.Dir != dir || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("err = %v (%T), want a SpoolError: %s's file system is full", err, err, dir)
			}
			if !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), "set TMPDIR") {
				t.Errorf("err = %v", err)
			}
			if res.Stopped != "" || res.Duration > 30*time.Second {
				t.Errorf("stopped %q after %v: the call was to end when the disk was found full", res.Stopped, res.Duration)
			}
			fi, err := os.Stat(out)
			if err != nil || res.Output.Bytes < 1<<20 || fi.Size() != res.Output.Bytes {
				t.Errorf("recorded %d bytes, the file holds %v (%v): what fitted was to be kept", res.Output.Bytes, fi, err)
			}
		})
	}
}

// After the CLI exits, its output is read to EOF: a daemon it left behind
// holding standard output and error is killed with its group (procgroup
// contains it), so the pipe closes and the call ends at once.
func TestRunDaemonLeftBehindDoesNotHoldTheCall(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	script := "setsid sh -c 'echo $$ > " + pidFile + "; echo daemon >&2; exec sleep 300' & sleep 0.2; echo the answer"
	res, err := Run(t.Context(), Options{CLI: "command", Command: []string{"sh", "-c", script}, Dir: t.TempDir(), Timeout: time.Minute})
	if err != nil || res.Exit != 0 || res.Stopped != "" || !strings.Contains(res.Text, "the answer") {
		t.Fatalf("exit %d stopped %q text %q: %v", res.Exit, res.Stopped, res.Text, err)
	}
	if res.Duration > 20*time.Second {
		t.Errorf("the call took %v: it waited for the daemon", res.Duration)
	}
}

// A holder of standard error that ralph did not start and cannot kill
// (here the test itself, through /proc/PID/fd/2) keeps the pipe open
// after the CLI exits: reading stops at the call's own timeout, which
// ends it as timed out, with standard output read whole; or when the
// caller cancels.
func TestRunOutputHeldOpenEndsAtTheCallsBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		cancel  bool
		want    string
	}{
		{"timeout", 3 * time.Second, false, StoppedTimeout},
		{"cancelled", 0, true, StoppedCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			flag := filepath.Join(t.TempDir(), "held")
			script := "echo $$; while [ ! -e " + flag + " ]; do sleep 0.02; done; seq 1 100000"
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var held *os.File
			defer func() {
				if held != nil {
					held.Close()
				}
			}()
			var text strings.Builder
			o := Options{CLI: "command", Command: []string{"sh", "-c", script}, Dir: t.TempDir(), Timeout: tc.timeout}
			o.OnEvent = func(e Event) {
				if e.Kind != EventText {
					return
				}
				if held == nil {
					pid, _ := strconv.Atoi(strings.Fields(e.Text)[0])
					f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/fd/2", os.O_WRONLY, 0)
					if err != nil {
						t.Errorf("hold the CLI's standard error: %v", err)
					}
					held = f
					os.WriteFile(flag, nil, 0o600)
					if tc.cancel {
						time.AfterFunc(2*time.Second, cancel)
					}
				}
				text.WriteString(e.Text + "\n")
			}
			res, err := Run(ctx, o)
			if err != nil || res.Stopped != tc.want || res.Exit != 0 {
				t.Fatalf("stopped %q exit %d (%v), want %q 0", res.Stopped, res.Exit, err, tc.want)
			}
			want, _ := exec.Command("seq", "1", "100000").Output()
			if !strings.HasSuffix(text.String(), string(want)) {
				t.Errorf("standard output was not read whole before the bound: %d bytes", text.Len())
			}
			if res.Duration > 30*time.Second {
				t.Errorf("the call took %v", res.Duration)
			}
		})
	}
}
