package cli_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// floodClaude writes, in dir, a stand-in `claude` (bin/claude) that reads
// its prompt and prints Claude Code's stream-json: the init line, mib
// mebibytes of assistant messages, then the result line that reports the
// call's cost; and returns every byte it prints.
func floodClaude(t *testing.T, dir string, mib int, cost string) []byte {
	t.Helper()
	const sid = "8f1c2a4e-3b9d-4f6a-9c1e-2d7b5a0e6f31"
	initLine := `{"type":"system","subtype":"init","cwd":"` + dir + `","session_id":"` + sid + `","tools":["Bash","Edit","Read"],"model":"claude-sonnet-4-5-20250929","permissionMode":"acceptEdits"}` + "\n"
	resultLine := `{"type":"result","subtype":"success","is_error":false,"duration_ms":14210,"num_turns":3,"result":"Add now returns the sum; the tests pass.","session_id":"` + sid + `","total_cost_usd":` + cost + `,"usage":{"input_tokens":15,"cache_creation_input_tokens":5430,"cache_read_input_tokens":35400,"output_tokens":412}}` + "\n"
	var block bytes.Buffer
	for i := 0; ; i++ {
		line := fmt.Sprintf(`{"type":"assistant","message":{"id":"msg_%08d","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Step %d: I read calc.go again; Add subtracts where it should add, so the fix is one line."}],"stop_reason":null,"usage":{"input_tokens":4,"cache_creation_input_tokens":310,"cache_read_input_tokens":11800,"output_tokens":%d}},"parent_tool_use_id":null,"session_id":"%s"}`+"\n", i, i, 40+i%50, sid)
		if block.Len()+len(line) > 1<<20 {
			break
		}
		block.WriteString(line)
	}
	printed := bytes.Join([][]byte{[]byte(initLine), bytes.Repeat(block.Bytes(), mib), []byte(resultLine)}, nil)
	// One file and one cat: the agent prints it all in a moment and exits,
	// long before ralph has parsed it.
	writeFile(t, filepath.Join(dir, "printed.jsonl"), string(printed))
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\ncat >/dev/null\nexec cat %s\n", filepath.Join(dir, "printed.jsonl"))
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return printed
}

// floodLoop is one iteration of cli = "claude" with the store in the
// project.
const floodLoop = `[intent]
goal = "flood"

[agent]
cli = "claude"
timeout = "30m"

[[stop]]
kind = "max_iterations"
max = 1

[store]
dir = ".ralph"
`

// agentCall is the run's agent.run CapabilityCall.
func agentCall(t *testing.T, e *e2e.E, dir string, env ...string) map[string]any {
	t.Helper()
	out, errOut, code := e.Ralph("chain", "show", "--json").In(dir).With(env...).Run()
	if code != 0 {
		t.Fatalf("chain show: exit %d: %s", code, errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var a map[string]any
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("chain line %q: %v", line, err)
		}
		if a["action_type"] == "CapabilityCall" && a["function_name"] == "agent.run" {
			return a
		}
	}
	t.Fatalf("the agent call was not recorded:\n%s", out)
	return nil
}

// HolesAgentOutputReadWhole (issue 37): an agent prints 128 MiB of Claude
// Code's stream-json, then its result line with the call's cost, and
// exits. Every byte is read after it exited, however long the parser
// takes: the call's output file holds all of it (size and SHA-256 on the
// record, checked here), and the call's cost is the result line's. Cut
// 2 s after the exit, the output was once recorded at 118–127 MB and the
// cost at $0.
var _ = suite.Add(e2e.Test{Name: "HolesAgentOutputReadWhole", Run: func(t *testing.T, e *e2e.E) {
	dir := e.Dir
	printed := floodClaude(t, dir, 128, "1.23")
	writeFile(t, filepath.Join(dir, "ralph.toml"), floodLoop)
	path := "PATH=" + filepath.Join(dir, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
	out, errOut, code := e.Ralph("run", "--no-tui").In(dir).With(path).Run()
	if code != 3 || !strings.Contains(out, "stopped after 1 iteration(s)") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out[max(0, len(out)-2000):], errOut)
	}
	call := agentCall(t, e, dir, path)
	md := call["metadata"].(map[string]any)
	sum := sha256.Sum256(printed)
	if md["output_bytes"] != strconv.Itoa(len(printed)) || md["output_sha256"] != hex.EncodeToString(sum[:]) {
		t.Errorf("recorded %v bytes, sha256 %v; the agent printed %d, %x", md["output_bytes"], md["output_sha256"], len(printed), sum)
	}
	if cost, _ := call["cost"].(float64); cost != 1.23 {
		t.Errorf("the call cost $%v, want the result line's $1.23 (metadata %v)", call["cost"], md)
	}
	fi, err := os.Stat(filepath.Join(dir, ".ralph", filepath.FromSlash(fmt.Sprint(md["output_file"]))))
	if err != nil || fi.Size() != int64(len(printed)) {
		t.Errorf("the output file: %v (%v), want %d bytes", fi, err, len(printed))
	}
}})

// HolesAgentSpoolCannotBeWritten (issue 37): the agent's standard output
// goes to a file in ralph's TMPDIR. On a full disk (a 2 MiB tmpfs, a
// 16 MiB output) the agent's writes fail, which it need not say; the call
// ends with the one sentence that names the directory, the full disk and
// the fix. A TMPDIR on a read-only file system is named the same way,
// before the agent starts.
var _ = suite.Add(e2e.Test{Name: "HolesAgentSpoolCannotBeWritten", Needs: mayMountTmpfs, Run: func(t *testing.T, e *e2e.E) {
	for _, tc := range []struct{ name, opts, want string }{
		{"full", "size=2m", "(no space left on device), so the call was ended and what it printed from then on is lost; free space in %s or set TMPDIR to a directory with room"},
		{"read-only", "size=2m,ro", "the agent's standard output needs a file in %s, which could not be made (read-only file system); set TMPDIR to a writable directory with room"},
	} {
		e.Run(tc.name, func(t *testing.T, e *e2e.E) {
			dir, tmp := e.Dir, filepath.Join(t.TempDir(), "tmp")
			if err := os.Mkdir(tmp, 0o700); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("mount", "-t", "tmpfs", "-o", tc.opts, "tmpfs", tmp).CombinedOutput(); err != nil {
				t.Fatalf("mount a tmpfs (%s): %v: %s", tc.opts, err, out)
			}
			t.Cleanup(func() {
				if out, err := exec.Command("umount", tmp).CombinedOutput(); err != nil {
					t.Errorf("umount %s: %v: %s", tmp, err, out)
				}
			})
			floodClaude(t, dir, 16, "0.5")
			writeFile(t, filepath.Join(dir, "ralph.toml"), floodLoop)
			path := "PATH=" + filepath.Join(dir, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
			out, errOut, code := e.Ralph("run", "--no-tui").In(dir).With(path, "TMPDIR="+tmp).Run()
			want := fmt.Sprintf(tc.want, tmp)
			if code != 3 || !strings.Contains(out, "stopped after 1 iteration(s)") {
				t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
			}
			call := agentCall(t, e, dir, path)
			if msg := fmt.Sprint(call["error_message"]); !strings.Contains(msg, want) || !strings.HasPrefix(msg, "agent.run: ") {
				t.Errorf("the call's error is %q, want it to say %q; the call: %v", msg, want, call)
			}
		})
	}
}})
