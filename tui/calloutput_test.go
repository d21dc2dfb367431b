package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

func callWithFile(rel string, bytes int, sha string) *ledger.Action {
	return &ledger.Action{Type: ledger.CapabilityCall, ActionID: "call-1", FunctionName: "agent.run",
		Metadata: map[string]rtfs.Value{"output_file": rtfs.String(rel), "output_bytes": rtfs.String(fmt.Sprint(bytes)),
			"output_sha256": rtfs.String(sha)}}
}

func TestDetailShowsTheEndOfTheOutputFile(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	rel := "logs/run-1/step-1.out"
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "agent line %d\n", i)
	}
	b.WriteString("bell\a and \xff binary")
	if err := os.MkdirAll(filepath.Join(store, "logs", "run-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, filepath.FromSlash(rel)), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	o := readCallOutput(callWithFile(rel, b.Len(), "abc"), store)
	if o == nil || o.err != nil || len(o.lines) != outputTailLines || o.lines[len(o.lines)-2] != "agent line 4999" {
		t.Fatalf("read %+v", o)
	}
	if last := o.lines[len(o.lines)-1]; last != "bell and \uFFFD binary" {
		t.Errorf("last line %q: control characters must go, invalid bytes become U+FFFD", last)
	}
	d := newDetailView(newStyles(&strings.Builder{}, 0))
	var out []string
	field := func(name, value string) { out = append(out, name+": "+value) }
	d.outputSection(o, field, &out)
	text := strings.Join(out, "\n")
	for _, want := range []string{"file: " + filepath.Join(store, "logs", "run-1", "step-1.out"),
		fmt.Sprintf("recorded: %d bytes, sha256 abc", b.Len()), "ralph view --output prints it whole", "  agent line 4999"} {
		if !strings.Contains(text, want) {
			t.Errorf("output section lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "the record says") {
		t.Errorf("a file of the recorded size shown as changed:\n%s", text)
	}

	// A file that changed since, one that is gone, a store not known here.
	o = readCallOutput(callWithFile(rel, b.Len()+1, "abc"), store)
	out = nil
	d.outputSection(o, field, &out)
	if text := strings.Join(out, "\n"); !strings.Contains(text, fmt.Sprintf("the file has %d bytes, the record says %d", b.Len(), b.Len()+1)) {
		t.Errorf("changed file:\n%s", text)
	}
	if o := readCallOutput(callWithFile("logs/gone.out", 1, "x"), store); o.err == nil {
		t.Error("a missing file read without an error")
	}
	if o := readCallOutput(callWithFile(rel, 1, "x"), ""); o.err == nil || !strings.Contains(o.err.Error(), "--output call-1") {
		t.Errorf("no store dir: %v", o.err)
	}
	if o := readCallOutput(&ledger.Action{}, store); o != nil {
		t.Errorf("an action without an output file: %+v", o)
	}
}

// dirStore is a Reader that says where its store is.
type dirStore struct {
	Reader
	dir string
}

func (d dirStore) Dir() string { return d.dir }

func TestModelFindsTheStoreDir(t *testing.T) {
	t.Parallel()
	st := newStyles(&strings.Builder{}, 0)
	dir := t.TempDir()
	if m := newModel(&Options{Store: dirStore{dir: dir}}, st); m.storeDir != dir {
		t.Errorf("storeDir %q, want the store's %q", m.storeDir, dir)
	}
	if m := newModel(&Options{Store: dirStore{dir: "nats://127.0.0.1:4222"}}, st); m.storeDir != "" {
		t.Errorf("storeDir %q for a fleet's address", m.storeDir)
	}
	if m := newModel(&Options{Store: dirStore{dir: dir}, StoreDir: "/elsewhere"}, st); m.storeDir != "/elsewhere" {
		t.Errorf("storeDir %q, want Options.StoreDir", m.storeDir)
	}
}

func TestOutputPaneNamesTheWholeOutput(t *testing.T) {
	t.Parallel()
	p := newOutputPane(newStyles(&strings.Builder{}, 0), time.Now)
	p.add("call-1", 1, time.Now(), &agent.Event{Kind: agent.EventText, Text: "working"})
	a := callWithFile("logs/r/s.out", 1234, "abc")
	a.Success = true
	p.ended(a)
	last := p.call.lines[len(p.call.lines)-1]
	if last.kind != outRaw || last.text != "whole output: logs/r/s.out (1234 bytes)" {
		t.Errorf("last line %+v, want the output file named", last)
	}
}
