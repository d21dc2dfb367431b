package agent

import (
	"bytes"
	"crypto/sha256"
	"io"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// A process that writes a lot and exits at once leaves every byte for the
// reader (a pipe loses what a CLI had not flushed when it exited), and the
// reader gets io.EOF only after finish.
func TestSpoolKeepsWhatAnExitingWriterWrote(t *testing.T) {
	t.Parallel()
	w, s, err := newSpool()
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
	w, s, err := newSpool()
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
// longer than pipeGrace, long after the CLI exited): the read is bounded
// by the output's end, never by a timer. A 2 s cut once recorded a 128 MiB
// output at 118–127 MB, its result line and cost lost.
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
				time.Sleep(pipeGrace + 500*time.Millisecond) // the CLI has exited by now
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
