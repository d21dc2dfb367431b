package builtin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/rtfs"
)

// commandRegistry registers agent.run running argv as a plain-text agent.
func commandRegistry(t *testing.T, argv ...string) *capability.Registry {
	t.Helper()
	r := capability.NewRegistry()
	if err := Register(r, Options{Workdir: t.TempDir(), Env: os.Environ(),
		Agent: AgentOptions{CLI: "command", Command: argv, Allow: []string{"command"}}}); err != nil {
		t.Fatal(err)
	}
	return r
}

// runAgentWithOutput runs agent.run with the host's output file for the
// call (under store) in its context.
func runAgentWithOutput(t *testing.T, r *capability.Registry, store string, secrets ...string) (capability.Result, error) {
	t.Helper()
	c := r.Get("agent.run")
	v, err := rtfs.ReadValue(`{:prompt "go"}`)
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Spec.InputFrom([]rtfs.Value{v})
	if err != nil {
		t.Fatal(err)
	}
	of := capability.OutputFile{Path: filepath.Join(store, "logs", "run-1", "step-1.out"), Rel: "logs/run-1/step-1.out", Redact: secrets}
	ctx := capability.WithOutputFile(capability.WithReporter(context.Background(), &recorder{}), of)
	return c.Handler(ctx, in)
}

func TestAgentRunRecordsItsOutputFile(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	// 300 KiB of text (more than a result keeps), binary bytes, a secret, and standard error.
	script := `i=0; while [ $i -lt 3000 ]; do printf 'line %05d of a chatty agent, with enough words to fill the line to a hundred bytes.\n' $i; i=$((i+1)); done
printf 'key sk-0123456789abcdef \377\376 end\n'; echo 'warn' >&2`
	r := commandRegistry(t, "sh", "-c", script)
	res, err := runAgentWithOutput(t, r, store, "sk-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(store, "logs", "run-1", "step-1.out")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	md := res.Metadata
	if md["output_file"] != "logs/run-1/step-1.out" || md["output_bytes"] != itoa(int64(len(data))) || md["output_sha256"] != hex.EncodeToString(sum[:]) {
		t.Errorf("output metadata %v, want the file's path, %d bytes and its sha256", md, len(data))
	}
	if md["stderr_file"] != "logs/run-1/step-1.err" || md["stderr_bytes"] != "5" {
		t.Errorf("stderr metadata %v", md)
	}
	if bytes.Contains(data, []byte("sk-0123456789abcdef")) || !bytes.Contains(data, []byte("key [REDACTED] \377\376 end\n")) {
		t.Errorf("the output file keeps the secret or lost the binary bytes: %q", data[len(data)-40:])
	}
	text := res.Value.AsMap().GetKey("text").Str()
	if !strings.HasPrefix(text, "[ralph: ") || !strings.Contains(text, "logs/run-1/step-1.out") || !strings.Contains(text, md["output_sha256"]) ||
		!utf8.ValidString(text) || len(text) > agent.MaxText+300 || md["text_cut_bytes"] == "" {
		t.Errorf("text: %d bytes, starts %q; want the tail with a marker naming the file", len(text), text[:min(len(text), 200)])
	}
}

func TestAgentRunWithoutOutputFile(t *testing.T) {
	t.Parallel()
	r := commandRegistry(t, "sh", "-c", "printf 'hello\\377\\n'")
	res, _, err := runAgent(t, r, `{:prompt "go"}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.Metadata["output_file"]; ok {
		t.Errorf("metadata %v names an output file outside a run", res.Metadata)
	}
	if text := res.Value.AsMap().GetKey("text").Str(); text != "hello\uFFFD" {
		t.Errorf("text %q, want the invalid byte replaced", text)
	}
}
