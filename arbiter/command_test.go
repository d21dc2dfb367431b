package arbiter_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/proctest"
)

// script writes an executable /bin/sh script into a temp dir.
func script(t *testing.T, body string) (path, dir string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

func newCommand(t *testing.T, argv []string, opts arbiter.CommandOptions) arbiter.Model {
	t.Helper()
	m, err := arbiter.NewCommand(argv, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCommandPromptInPlanOut(t *testing.T) {
	t.Parallel()
	path, dir := script(t, `cat > "$(dirname "$0")/prompt.txt"; printf '(do (call :ccos.echo {:message "%s"}))' "$1"`)
	m := newCommand(t, []string{path, "from argv"}, arbiter.CommandOptions{Price: config.Price{InputPerMTok: 3, OutputPerMTok: 15}})
	if m.Name() != "command/agent.sh" {
		t.Errorf("Name = %q", m.Name())
	}
	c := arbiter.Completion{Messages: []arbiter.Message{
		{Role: "system", Content: "Write RTFS."}, {Role: "user", Content: "Greet."},
		{Role: "assistant", Content: "(do"}, {Role: "user", Content: "1:4: unbalanced; close the list"},
	}, JSON: true}
	obs := &recorder{}
	reply, err := m.Complete(context.Background(), c, obs)
	if err != nil {
		t.Fatal(err)
	}
	want := `(do (call :ccos.echo {:message "from argv"}))`
	if reply.Text != want || strings.Join(obs.tokens, "") != want {
		t.Errorf("reply %q, tokens %q", reply.Text, obs.tokens)
	}
	got, err := os.ReadFile(filepath.Join(dir, "prompt.txt"))
	if err != nil {
		t.Fatal(err)
	}
	wantPrompt := "# System\n\nWrite RTFS.\n\n# User\n\nGreet.\n\n# Assistant (your previous answer)\n\n(do\n\n# User\n\n" +
		"1:4: unbalanced; close the list\n\nReply with one JSON object and nothing else."
	if string(got) != wantPrompt {
		t.Errorf("stdin = %q\nwant    %q", got, wantPrompt)
	}
	u := reply.Usage
	if u.PromptTokens != int64((len(wantPrompt)+3)/4) || u.CompletionTokens != int64((len(want)+3)/4) ||
		!near(u.CostUSD, (float64(u.PromptTokens)*3+float64(u.CompletionTokens)*15)/1e6) {
		t.Errorf("usage = %+v", u)
	}
}

func TestCommandSingleMessageIsSentAsIs(t *testing.T) {
	t.Parallel()
	m := newCommand(t, []string{"cat"}, arbiter.CommandOptions{})
	reply, err := m.Complete(context.Background(), arbiter.Completion{Messages: []arbiter.Message{{Role: "user", Content: "just this\n"}}}, nil)
	if err != nil || reply.Text != "just this\n" {
		t.Errorf("reply %q, %v", reply.Text, err)
	}
}

func TestCommandRunsInWorkdir(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	m := newCommand(t, []string{"pwd"}, arbiter.CommandOptions{Workdir: work})
	reply, err := m.Complete(context.Background(), prompt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := filepath.EvalSymlinks(strings.TrimSpace(reply.Text)); got != mustEval(t, work) {
		t.Errorf("ran in %q, want %q", reply.Text, work)
	}
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCommandFailureQuotesStderr(t *testing.T) {
	t.Parallel()
	path, _ := script(t, `cat >/dev/null; echo "partial plan"; echo "error: model overloaded, try later" >&2; exit 3`)
	_, err := newCommand(t, []string{path, "-p"}, arbiter.CommandOptions{}).Complete(context.Background(), prompt, nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{path + " -p", "exited with status 3", "stderr: error: model overloaded, try later"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if errors.Is(err, arbiter.ErrFatal) {
		t.Errorf("a failed run is not fatal: %v", err)
	}
}

func TestCommandStderrIsBounded(t *testing.T) {
	t.Parallel()
	path, _ := script(t, `i=0; while [ $i -lt 3000 ]; do echo "noise line $i" >&2; i=$((i+1)); done; echo "the real reason" >&2; exit 1`)
	_, err := newCommand(t, []string{path}, arbiter.CommandOptions{}).Complete(context.Background(), prompt, nil)
	if err == nil || !strings.Contains(err.Error(), "the real reason") || !strings.Contains(err.Error(), "…") || len(err.Error()) > 2300 {
		t.Errorf("error (%d bytes) = %.300q…", len(err.Error()), err)
	}
}

func TestCommandTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	path, dir := script(t, `sleep 60 & echo $! > "$(dirname "$0")/child.pid"; echo "thinking" >&2; wait`)
	m := newCommand(t, []string{path}, arbiter.CommandOptions{Timeout: 300 * time.Millisecond})
	_, err := m.Complete(context.Background(), prompt, nil)
	if err == nil || !strings.Contains(err.Error(), "did not finish within 300ms") || !strings.Contains(err.Error(), "stderr: thinking") {
		t.Fatalf("err = %v", err)
	}
	b, rerr := os.ReadFile(filepath.Join(dir, "child.pid"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 {
		t.Fatalf("child pid %q", b)
	}
	// The child was SIGKILLed with its group; give the kernel a moment to
	// reap it (it was reparented), then it must be gone.
	proctest.WaitGone(t, pid)
}

func TestCommandOutputIsCapped(t *testing.T) {
	t.Parallel()
	m := newCommand(t, []string{"yes", "(do)"}, arbiter.CommandOptions{MaxOutput: 4096})
	_, err := m.Complete(context.Background(), prompt, nil)
	if err == nil || !strings.Contains(err.Error(), "more than 4096 bytes") {
		t.Errorf("err = %v", err)
	}
}

func TestCommandNotFoundIsFatal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "plain.txt")
	if err := os.WriteFile(notExec, []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"ralph-no-such-agent-cli"}, "was not found on PATH"},
		{[]string{filepath.Join(dir, "missing")}, "was not found"},
		{[]string{"./missing.sh"}, filepath.Join(dir, "missing.sh") + " was not found"},
		{[]string{notExec}, "is not executable"},
		{nil, "needs model.command"},
	} {
		_, err := arbiter.NewCommand(tc.argv, arbiter.CommandOptions{Workdir: dir})
		if !errors.Is(err, arbiter.ErrFatal) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want ErrFatal mentioning %q", tc.argv, err, tc.want)
		}
	}
	// A program that disappears after the check fails the same way.
	path, _ := script(t, "cat")
	m := newCommand(t, []string{path}, arbiter.CommandOptions{})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Complete(context.Background(), prompt, nil); !errors.Is(err, arbiter.ErrFatal) || !strings.Contains(err.Error(), "fix model.command") {
		t.Errorf("removed program: %v", err)
	}
}

func TestCommandRelativeProgramRunsFromWorkdir(t *testing.T) {
	t.Parallel()
	_, dir := script(t, `echo "(do 2)"`)
	reply, err := newCommand(t, []string{"./agent.sh"}, arbiter.CommandOptions{Workdir: dir}).Complete(context.Background(), prompt, nil)
	if err != nil || strings.TrimSpace(reply.Text) != "(do 2)" {
		t.Errorf("reply %q, %v", reply.Text, err)
	}
}

func TestCommandCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	m := newCommand(t, []string{"sleep", "60"}, arbiter.CommandOptions{})
	done := make(chan error, 1)
	go func() {
		_, err := m.Complete(ctx, prompt, nil)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
}

func TestCommandTokensStayWholeRunes(t *testing.T) {
	t.Parallel()
	// "€" is E2 82 AC: written in two pieces with a pause between them.
	path, _ := script(t, `printf 'price \342\202'; sleep 0.2; printf '\254 ok'`)
	obs := &recorder{}
	reply, err := newCommand(t, []string{path}, arbiter.CommandOptions{}).Complete(context.Background(), prompt, obs)
	if err != nil || reply.Text != "price € ok" {
		t.Fatalf("reply %q, %v", reply.Text, err)
	}
	for _, tok := range obs.tokens {
		if !utf8.ValidString(tok) {
			t.Errorf("token %q is not valid UTF-8", tok)
		}
	}
	if strings.Join(obs.tokens, "") != reply.Text {
		t.Errorf("tokens %q", obs.tokens)
	}
}

func TestCommandBackgroundChildDoesNotHang(t *testing.T) {
	t.Parallel()
	// The child keeps stdout open after the script exits; the answer still
	// comes back (after the pipe wait), and the child dies with the group.
	path, _ := script(t, `sleep 60 & echo "(do 1)"`)
	reply, err := newCommand(t, []string{path}, arbiter.CommandOptions{Timeout: time.Minute}).Complete(context.Background(), prompt, nil)
	if err != nil || strings.TrimSpace(reply.Text) != "(do 1)" {
		t.Errorf("reply %q, %v", reply.Text, err)
	}
}

func TestFlatten(t *testing.T) {
	t.Parallel()
	if got := arbiter.Flatten(nil); got != "" {
		t.Errorf("Flatten(nil) = %q", got)
	}
	if got := arbiter.Flatten([]arbiter.Message{{Role: "system", Content: "only"}}); got != "only" {
		t.Errorf("one message = %q", got)
	}
}

// An agent that fails while a child it left holds stdout open still fails:
// its exit status is not lost to the pipe wait.
func TestCommandBackgroundChildKeepsTheExitStatus(t *testing.T) {
	t.Parallel()
	path, _ := script(t, `cat >/dev/null; sleep 60 & echo "(do 1)"; exit 3`)
	_, err := newCommand(t, []string{path}, arbiter.CommandOptions{Timeout: time.Minute}).Complete(context.Background(), prompt, nil)
	if err == nil || !strings.Contains(err.Error(), "exited with status 3") {
		t.Errorf("an agent that exited 3 gave %v", err)
	}
}
