package builtin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/internal/proctest"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

func newRegistry(t *testing.T, allow ...string) (*capability.Registry, string) {
	t.Helper()
	dir := t.TempDir()
	store, err := ledger.Open(ledger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	r := capability.NewRegistry()
	if err := Register(r, Options{Workdir: dir, ShellAllow: allow, KV: store.KV()}); err != nil {
		t.Fatal(err)
	}
	return r, dir
}

// invoke parses RTFS argument text, shapes it for the spec and runs it.
func invoke(t *testing.T, r *capability.Registry, id string, args ...string) (capability.Result, error) {
	t.Helper()
	c := r.Get(id)
	if c == nil {
		t.Fatalf("no capability %s", id)
	}
	vals := make([]rtfs.Value, len(args))
	for i, a := range args {
		v, err := rtfs.ReadValue(a)
		if err != nil {
			t.Fatal(err)
		}
		vals[i] = v
	}
	in, err := c.Spec.InputFrom(vals)
	if err != nil {
		return capability.Result{}, err
	}
	return c.Handler(context.Background(), in)
}

func TestEchoAndMath(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t)
	cases := []struct {
		id   string
		args []string
		want string
		err  string
	}{
		{"ccos.echo", []string{`{:message "hi"}`}, `"hi"`, ""},
		{"ccos.echo", []string{`"positional"`}, `"positional"`, ""},
		{"ccos.echo", []string{`{:message 1}`}, "", "ccos.echo: :message expected string, got int"},
		{"ccos.echo", []string{`{:msg "x"}`}, "", "ccos.echo: :message expected :string (required), got nil"},
		{"ccos.math.add", []string{"2", "3"}, "5", ""},
		{"ccos.math.sub", []string{"2", "3.5"}, "-1.5", ""},
		{"ccos.math.mul", []string{"4", "5"}, "20", ""},
		{"ccos.math.div", []string{"6", "3"}, "2", ""},
		{"ccos.math.div", []string{"7", "2"}, "3.5", ""},
		{"ccos.math.div", []string{"1", "0"}, "", "division by zero"},
		{"ccos.math.add", []string{"1"}, "", "expected a vector of 2"},
		{"ccos.math.add", []string{"9223372036854775807", "1"}, "", "integer overflow"},
	}
	for _, tc := range cases {
		res, err := invoke(t, r, tc.id, tc.args...)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %v: got %v, want error %q", tc.id, tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || rtfs.Print(res.Value) != tc.want {
			t.Errorf("%s %v = %s, %v; want %s", tc.id, tc.args, rtfs.Print(res.Value), err, tc.want)
		}
	}
}

func TestAttestationTracksSpec(t *testing.T) {
	t.Parallel()
	s := echoRow().spec
	a := s.Attestation()
	if len(a) != 64 {
		t.Fatalf("attestation %q", a)
	}
	s2 := echoRow().spec
	s2.Risk = capability.RiskHigh
	if s2.Attestation() == a {
		t.Error("changing the risk did not change the attestation")
	}
	if echoRow().spec.Attestation() != a {
		t.Error("attestation is not deterministic")
	}
}

func TestShellExec(t *testing.T) {
	t.Parallel()
	r, dir := newRegistry(t, "sh", "echo", "true", "false")
	res, err := invoke(t, r, "shell.exec", `{:cmd "echo" :args ["hello" "world"]}`)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Value.AsMap()
	if m.GetKey("stdout").Str() != "hello world\n" || m.GetKey("exit").AsInt() != 0 {
		t.Errorf("result %s", rtfs.Print(res.Value))
	}
	if res.Metadata["exit"] != "0" || res.Metadata["cmd"] != "echo hello world" {
		t.Errorf("metadata %v", res.Metadata)
	}
	// Runs in the workdir, with stdin and env.
	res, err = invoke(t, r, "shell.exec", `{:cmd "sh" :args ["-c" "pwd; cat; echo $GREETING"] :stdin "in" :env {"GREETING" "hey"}}`)
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := filepath.EvalSymlinks(dir)
	if got := res.Value.AsMap().GetKey("stdout").Str(); got != wd+"\ninhey\n" {
		t.Errorf("stdout %q", got)
	}
	// A non-zero exit fails the call but keeps the result; :check false accepts it.
	res, err = invoke(t, r, "shell.exec", `{:cmd "false"}`)
	if err == nil || !strings.Contains(err.Error(), "exited with status 1") || res.Metadata["exit"] != "1" {
		t.Errorf("false: %v %v", err, res.Metadata)
	}
	if _, err = invoke(t, r, "shell.exec", `{:cmd "false" :check false}`); err != nil {
		t.Errorf(":check false: %v", err)
	}
}

func TestShellBackgroundChildKeepsExitStatus(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, "sh")
	// The child exits 0 while a background grandchild holds stdout open.
	res, err := invoke(t, r, "shell.exec", `{:cmd "sh" :args ["-c" "sleep 30 & echo started"]}`)
	if err != nil || res.Metadata["exit"] != "0" || res.Value.AsMap().GetKey("stdout").Str() != "started\n" {
		t.Fatalf("got %s, %v; want exit 0 and stdout \"started\"", rtfs.Print(res.Value), err)
	}
	_, err = invoke(t, r, "shell.exec", `{:cmd "sh" :args ["-c" "sleep 30 & exit 3"]}`)
	if err == nil || !strings.Contains(err.Error(), "exited with status 3") {
		t.Errorf("got %v, want exit status 3", err)
	}
}

func TestShellAllowlist(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, "echo")
	for _, cmd := range []string{"rm", "/bin/echo", "sh", ""} {
		_, err := invoke(t, r, "shell.exec", `{:cmd "`+cmd+`"}`)
		var na *NotAllowedError
		if !errors.As(err, &na) {
			t.Errorf("%q: got %v, want NotAllowedError", cmd, err)
		}
	}
	if _, err := invoke(t, r, "shell.exec", `{:cmd "echo" :dir "../"}`); err == nil || !strings.Contains(err.Error(), `contains ".."`) {
		t.Errorf(":dir escape: %v", err)
	}
}

func TestShellOutputCap(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, "sh")
	res, err := invoke(t, r, "shell.exec", `{:cmd "sh" :args ["-c" "head -c 3000000 /dev/zero | tr '\\0' x"]}`)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Value.AsMap()
	if n := len(m.GetKey("stdout").Str()); n != MaxOutput || !m.GetKey("truncated").AsBool() {
		t.Errorf("stdout %d bytes, truncated %v", n, m.GetKey("truncated").AsBool())
	}
}

func TestShellTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, "sh")
	// The child starts a grandchild that sleeps 60 s and prints its pid.
	res, err := invoke(t, r, "shell.exec", `{:cmd "sh" :args ["-c" "sleep 60 & echo $!; wait"] :timeout-ms 300}`)
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("got %v, want a timeout", err)
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(res.Value.AsMap().GetKey("stdout").Str()))
	if perr != nil {
		t.Fatalf("grandchild pid from %q: %v", rtfs.Print(res.Value), perr)
	}
	// The kill is synchronous, but the grandchild may be a zombie until init
	// reaps it; wait for it to be gone (bounded), never for a fixed time.
	proctest.WaitGone(t, pid)
}

func TestFilesConfined(t *testing.T) {
	t.Parallel()
	r, dir := newRegistry(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ id, arg string }{
		{"fs.read", `{:path "../secret"}`},
		{"fs.read", `{:path "a/../../secret"}`},
		{"fs.read", `{:path "` + filepath.Join(outside, "secret") + `"}`},
		{"fs.read", `{:path "link"}`},
		{"fs.write", `{:path "linkdir/new" :content "x"}`},
		{"fs.write", `{:path "/etc/ralph-test" :content "x"}`},
		{"fs.list", `{:path "linkdir"}`},
		{"fs.list", `{:path ".."}`},
	}
	for _, tc := range cases {
		_, err := invoke(t, r, tc.id, tc.arg)
		var esc *EscapeError
		if !errors.As(err, &esc) {
			t.Errorf("%s %s: got %v, want an EscapeError", tc.id, tc.arg, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Error("a write escaped through a symlink")
	}
}

func TestFilesReadWriteList(t *testing.T) {
	t.Parallel()
	r, dir := newRegistry(t)
	res, err := invoke(t, r, "fs.write", `{:path "sub/notes.txt" :content "one\n"}`)
	if err != nil || rtfs.Print(res.Value) != `{:bytes 4 :path "sub/notes.txt"}` {
		t.Fatalf("write: %s %v", rtfs.Print(res.Value), err)
	}
	if _, err := invoke(t, r, "fs.write", `{:path "sub/notes.txt" :content "two\n" :append true}`); err != nil {
		t.Fatal(err)
	}
	res, err = invoke(t, r, "fs.read", `{:path "`+filepath.Join(dir, "sub/notes.txt")+`"}`)
	if err != nil || res.Value.Str() != "one\ntwo\n" {
		t.Fatalf("read: %q %v", res.Value.Str(), err)
	}
	res, err = invoke(t, r, "fs.list", `{:path "."}`)
	if err != nil || len(res.Value.Items()) != 1 {
		t.Fatalf("list: %s %v", rtfs.Print(res.Value), err)
	}
	if e := res.Value.Items()[0].AsMap(); e.GetKey("name").Str() != "sub" || !e.GetKey("dir").AsBool() {
		t.Errorf("list entry %s", rtfs.Print(res.Value))
	}
	if _, err := invoke(t, r, "fs.read", `{:path "missing"}`); err == nil || strings.Contains(err.Error(), dir) {
		t.Errorf("missing file: %v (must not leak the absolute workdir)", err)
	}
}

func TestKV(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t)
	if res, err := invoke(t, r, "kv.get", `{:key "n"}`); err != nil || !res.Value.IsNil() {
		t.Fatalf("empty get: %s %v", rtfs.Print(res.Value), err)
	}
	if _, err := invoke(t, r, "kv.put", `{:key "n" :value {:count 3}}`); err != nil {
		t.Fatal(err)
	}
	if res, err := invoke(t, r, "kv.get", `{:key "n"}`); err != nil || rtfs.Print(res.Value) != "{:count 3}" {
		t.Fatalf("get: %s %v", rtfs.Print(res.Value), err)
	}
}

func TestShellEnvCannotChangeTheProgram(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, "echo")
	for _, name := range []string{"PATH", "LD_PRELOAD", "GIT_CONFIG_COUNT", "NODE_OPTIONS", "BASH_ENV", "PERL5OPT"} {
		_, err := invoke(t, r, "shell.exec", `{:cmd "echo" :env {"`+name+`" "x"}}`)
		if err == nil || !strings.Contains(err.Error(), "may not set "+name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := invoke(t, r, "shell.exec", `{:cmd "echo" :env {"GREETING" "hi"}}`); err != nil {
		t.Errorf("a plain variable was refused: %v", err)
	}
}

// A call cancelled from outside says it was cancelled and why (the
// context's cause), never that it timed out; its own timeout stays a timeout.
func TestShellCancellationIsNotATimeout(t *testing.T) {
	t.Parallel()
	r, _ := newRegistry(t, "sleep")
	c := r.Get("shell.exec")
	arg, err := rtfs.ReadValue(`{:cmd "sleep" :args ["30"]}`)
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Spec.InputFrom([]rtfs.Value{arg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(100*time.Millisecond, func() { cancel(errors.New("iteration skipped by the user")) })
	_, err = c.Handler(ctx, in)
	if err == nil || err.Error() != "shell.exec sleep: cancelled (iteration skipped by the user); the process group was killed" {
		t.Errorf("cancelled call: %v", err)
	}
	_, err = invoke(t, r, "shell.exec", `{:cmd "sleep" :args ["30"] :timeout-ms 100}`)
	if err == nil || err.Error() != "shell.exec sleep: timed out after 100ms; the process group was killed" {
		t.Errorf("timed-out call: %v", err)
	}
}
