package cli_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// AgentFloodIsRecordedWhole: an agent (cli = "command") prints 16 MiB
// — text, a line longer than any buffer, binary bytes — and the run
// completes with the call recorded: the output file holds every byte, its
// size and SHA-256 (computed here) are on the call, the recorded text is a
// bounded tail with a marker, and ralph view --output prints the file.
var _ = suite.Add(e2e.Test{Name: "AgentFloodIsRecordedWhole", Run: func(t *testing.T, e *e2e.E) {
	dir := t.TempDir()
	var data bytes.Buffer
	for i := 0; data.Len() < 10<<20; i++ {
		fmt.Fprintf(&data, "flood line %07d: the agent explains what it changes next\n", i)
	}
	data.WriteString(strings.Repeat("x", 5<<20) + "\n") // longer than the 4 MiB a line is parsed to
	for i := 0; data.Len() < 16<<20; i++ {
		data.WriteByte(byte(i * 31 % 256)) // binary: NULs, invalid UTF-8, escapes
	}
	data.WriteString("\nthe end\n")
	writeFile(t, filepath.Join(dir, "flood.bin"), data.String())
	writeFile(t, filepath.Join(dir, "ralph.toml"), `[intent]
goal = "flood"

[agent]
cli = "command"
command = ["cat", "flood.bin"]

[[stop]]
kind = "max_iterations"
max = 1

[store]
dir = ".ralph"
`)
	out, errOut, code := e.Ralph("run", "--no-tui").In(dir).Run()
	if code != 3 || !strings.Contains(out, "stopped after 1 iteration(s)") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out[max(0, len(out)-2000):], errOut)
	}
	var call map[string]any
	for _, a := range (&agentProject{e: e, dir: dir}).chain(t) {
		if a["action_type"] == "CapabilityCall" && a["function_name"] == "agent.run" {
			call = a
		}
	}
	if call == nil {
		t.Fatal("the agent call was not recorded")
	}
	md := call["metadata"].(map[string]any)
	sum := sha256.Sum256(data.Bytes())
	if md["output_bytes"] != strconv.Itoa(data.Len()) || md["output_sha256"] != hex.EncodeToString(sum[:]) {
		t.Errorf("recorded %v bytes, sha256 %v; want %d, %x", md["output_bytes"], md["output_sha256"], data.Len(), sum)
	}
	rel, _ := md["output_file"].(string)
	runID, _ := call["run_id"].(string)
	step, _ := call["parent_action_id"].(string) // the PlanStepStarted the call runs under
	if rel != "logs/"+runID+"/"+step+".out" {
		t.Errorf("output_file %q, want logs/%s/%s.out", rel, runID, step)
	}
	for _, a := range (&agentProject{e: e, dir: dir}).chain(t) {
		if a["action_id"] == step && a["action_type"] != "PlanStepStarted" {
			t.Errorf("the call's parent is a %v, not its PlanStepStarted", a["action_type"])
		}
	}
	file := filepath.Join(dir, ".ralph", filepath.FromSlash(rel))
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, data.Bytes()) {
		t.Errorf("the output file holds %d bytes (%v), not what the agent printed", len(got), err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("output file mode: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Dir(file)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("logs directory mode: %v %v", fi.Mode(), err)
	}
	// The recorded text is the end, with a marker naming the whole.
	text := fmt.Sprint(call["result"])
	if !strings.Contains(text, "bytes cut before this; the whole output is in "+rel) || !strings.Contains(text, "the end") || len(text) > 80<<10 {
		t.Errorf("recorded text: %d bytes: %.300s", len(text), text)
	}
	if n, _ := strconv.ParseInt(fmt.Sprint(md["text_cut_bytes"]), 10, 64); n < 14<<20 {
		t.Errorf("text_cut_bytes %v", md["text_cut_bytes"])
	}
	// ralph view --output prints it whole.
	printed, errOut, code := e.Ralph("view", runID[:13], "--output", "last").In(dir).Run()
	if code != 0 || printed != data.String() {
		t.Errorf("view --output: exit %d, %d bytes (want %d): %s", code, len(printed), data.Len(), errOut)
	}
	if _, errOut, code := e.Ralph("chain", "verify").In(dir).Run(); code != 0 {
		t.Errorf("verify: %d %s", code, errOut)
	}
	// A changed file is named as such.
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("tampered")
	f.Close()
	if _, errOut, code := e.Ralph("view", runID, "--output", "last").In(dir).Run(); code != 1 || !strings.Contains(errOut, "the file was changed after the call") {
		t.Errorf("view --output of a changed file: exit %d: %s", code, errOut)
	}
}})
