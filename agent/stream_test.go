package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunStreamsEventsAsTheyArrive: the agent prints a line and then waits
// for a file that only the OnEvent handler of that line creates. Were
// events not delivered while the agent runs, the call would hit its
// timeout.
func TestRunStreamsEventsAsTheyArrive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	script := `echo '{"type":"system","subtype":"init","session_id":"s1"}'; while [ ! -e gate ]; do sleep 0.02; done; ` +
		`echo '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"done","session_id":"s1"}'`
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\ncat >/dev/null\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := Options{CLI: "claude", Prompt: "p", Dir: dir, Env: []string{"PATH=" + bin + ":/usr/bin:/bin"}, Timeout: 10 * time.Second}
	o.OnEvent = func(e Event) {
		if e.Kind == EventSession {
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	res, err := Run(context.Background(), o)
	if err != nil || res.Stopped != "" || res.Text != "done" {
		t.Fatalf("err %v stopped %q text %q", err, res.Stopped, res.Text)
	}
}

func TestRunLargePromptAndOutput(t *testing.T) {
	t.Parallel()
	prompt := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB, more than a pipe holds
	out := filepath.Join(t.TempDir(), "call.out")
	res, err := Run(context.Background(), Options{CLI: "command", Command: []string{"cat"}, Prompt: prompt, Dir: t.TempDir(),
		OutputFile: out})
	// The result keeps the text's tail; the output file has it all.
	if err != nil || res.Exit != 0 || !strings.HasSuffix(prompt, res.Text) || len(res.Text) != MaxText ||
		res.TextCut != int64(len(prompt)-MaxText) {
		t.Fatalf("err %v exit %d: %d bytes back of %d, %d cut", err, res.Exit, len(res.Text), len(prompt), res.TextCut)
	}
	if got, err := os.ReadFile(out); err != nil || string(got) != prompt {
		t.Fatalf("output file: %d bytes of %d (%v)", len(got), len(prompt), err)
	}
}

func TestRunKeepsTheTailOfStderr(t *testing.T) {
	t.Parallel()
	script := `i=0; while [ $i -lt 3000 ]; do echo "warning line $i" >&2; i=$((i+1)); done; echo last >&2`
	res, err := Run(context.Background(), Options{CLI: "command", Command: []string{"sh", "-c", script}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stderr) != MaxStderr || !strings.HasSuffix(res.Stderr, "warning line 2999\nlast\n") {
		t.Errorf("stderr: %d bytes ending %q", len(res.Stderr), res.Stderr[max(len(res.Stderr)-40, 0):])
	}
}

func TestScanLinesLongLines(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 200<<10) // past the reader's 64 KiB buffer
	huge := strings.Repeat("y", MaxLine+10)
	var got []int
	scanLines(strings.NewReader("a\n"+long+"\n"+huge+"\nb"), func(l []byte) { got = append(got, len(l)) })
	want := []int{1, len(long), MaxLine, 1}
	if len(got) != len(want) {
		t.Fatalf("lines %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("lines %v, want %v", got, want)
		}
	}
}
