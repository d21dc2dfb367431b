package agent

import (
	"bytes"
	"crypto/sha256"
	"io"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
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
	// What was read is released from the disk (a punched hole, on Linux).
	if runtime.GOOS == "linux" {
		var st syscall.Stat_t
		if err := syscall.Fstat(int(s.r.Fd()), &st); err == nil && st.Size == n && st.Blocks*512 > 4*spoolRelease {
			t.Logf("the filesystem keeps %d bytes of a %d-byte file: it does not punch holes", st.Blocks*512, st.Size)
		}
	}
	s.finish()
	if got := <-done; got != n {
		t.Fatalf("read %d bytes, want %d", got, n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
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
