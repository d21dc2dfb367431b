package builtin

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/capability"
	"github.com/ralphloop/ralph/internal/procgroup"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/sandbox"
)

// MaxOutput caps each of stdout and stderr of shell.exec.
const MaxOutput = 1 << 20

// DefaultShellTimeout applies when a call gives no :timeout-ms.
const DefaultShellTimeout = 10 * time.Minute

// NotAllowedError is returned for a command missing from the allowlist.
type NotAllowedError struct {
	Cmd   string
	Allow []string
}

func (e *NotAllowedError) Error() string {
	return fmt.Sprintf("shell.exec: command %q is not in shell_allow %v; add it to [governance].shell_allow to permit it", e.Cmd, e.Allow)
}

// RTFSType names the error in RTFS catch maps.
func (e *NotAllowedError) RTFSType() string { return "governance/denied" }

type shell struct {
	workdir string
	allow   []string
	env     []string
}

func shellRow() row {
	return row{
		spec: &capability.Spec{
			ID: "shell.exec", Version: "1.0.0",
			Description: "Run a program (argv, no shell) in the workdir; non-zero exit fails unless :check false.",
			Input: rtfs.MustParseType(`[:map [:cmd :string] [:args {:optional true} [:vector :string]]
				[:dir {:optional true} :string] [:timeout-ms {:optional true} :int]
				[:env {:optional true} [:map-of :string :string]] [:stdin {:optional true} :string]
				[:check {:optional true} :boolean]]`),
			Output:   rtfs.MustParseType("[:map [:exit :int] [:stdout :string] [:stderr :string] [:duration-ms :int] [:truncated :boolean]]"),
			Effects:  []capability.Effect{{Kind: "process"}, {Kind: "fs", Params: rtfs.NewMap(rtfs.Keyword("write"), rtfs.True)}},
			Risk:     capability.RiskHigh,
			Examples: []string{`(call :shell.exec {:cmd "go" :args ["test" "./..."]})`},
			Program:  func(in rtfs.Value) string { return in.AsMap().GetKey("cmd").Str() },
			Reports:  []string{"exit", "cmd", "containment"},
		},
		handler: func(h *host) capability.Handler {
			return (&shell{workdir: h.workdir, allow: h.ShellAllow, env: h.env}).run
		},
	}
}

// run is shell.exec's handler: it checks the call, runs the command
// contained under its timeout and reports its exit, output and duration.
func (s *shell) run(ctx context.Context, in rtfs.Value) (capability.Result, error) {
	m := in.AsMap()
	req, err := s.request(m)
	if err != nil {
		return capability.Result{}, err
	}
	timedOut := fmt.Errorf("timed out after %s", req.timeout)
	ctx, cancel := context.WithTimeoutCause(ctx, req.timeout, timedOut)
	defer cancel()

	cmd, err := s.command(ctx, req, m)
	if err != nil {
		return capability.Result{}, err
	}
	stdout, stderr := procgroup.CappedBuffer{Limit: MaxOutput}, procgroup.CappedBuffer{Limit: MaxOutput}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	// Contained (a cgroup, else a subreaper and a sweep; a watcher when
	// ralph dies): the timeout kills every descendant, one in a new
	// session too, and nothing outlives a SIGKILLed ralph.
	containment, runErr := sandbox.RunContained(ctx, cmd, 2*time.Second, procgroup.StartOptions{})
	dur := time.Since(start)

	exit := -1
	if cmd.ProcessState != nil {
		exit = cmd.ProcessState.ExitCode()
	}
	var startErr error
	var exitErr *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exitErr) && ctx.Err() == nil {
		startErr = runErr // could not start (not found, permission)
	}
	res := capability.Result{
		Value: rtfs.MapValue(rtfs.NewMap(
			rtfs.Keyword("exit"), rtfs.Int(int64(exit)),
			rtfs.Keyword("stdout"), rtfs.String(stdout.String()),
			rtfs.Keyword("stderr"), rtfs.String(stderr.String()),
			rtfs.Keyword("duration-ms"), rtfs.Int(dur.Milliseconds()),
			rtfs.Keyword("truncated"), rtfs.Bool(stdout.Truncated || stderr.Truncated),
		)),
		Metadata: map[string]string{"exit": strconv.Itoa(exit), "cmd": strings.Join(append([]string{req.cmd}, req.args...), " "),
			"containment": containment},
	}
	switch {
	case startErr != nil:
		return res, fmt.Errorf("shell.exec %s: %w", req.cmd, startErr)
	case ctx.Err() != nil:
		// Its own timeout, or whoever cancelled the call (a skip, an
		// abort, a signal, a step's :timeout-ms), as the context says.
		return res, fmt.Errorf("shell.exec %s: %s; the process group was killed", req.cmd, stopCause(ctx, timedOut))
	case exit != 0 && !isFalse(m.GetKey("check")):
		return res, fmt.Errorf("shell.exec %s exited with status %d", req.cmd, exit)
	}
	return res, nil
}

// shellRequest is what a shell.exec call asks to run: the allowed program,
// its arguments, the directory inside the workdir and the timeout.
type shellRequest struct {
	cmd     string
	args    []string
	dir     string
	timeout time.Duration
}

// request checks a call's :cmd against the allow list, confines its :dir
// and reads its :args and :timeout-ms.
func (s *shell) request(m *rtfs.Map) (shellRequest, error) {
	req := shellRequest{cmd: m.GetKey("cmd").Str(), dir: s.workdir, timeout: DefaultShellTimeout}
	if !capability.CommandAllowed(req.cmd, s.allow) {
		return req, &NotAllowedError{Cmd: req.cmd, Allow: s.allow}
	}
	for _, a := range m.GetKey("args").Items() {
		req.args = append(req.args, a.Str())
	}
	if d := m.GetKey("dir"); !d.IsNil() {
		var err error
		if req.dir, err = confine(s.workdir, d.Str()); err != nil {
			return req, fmt.Errorf("shell.exec :dir: %w", err)
		}
	}
	if t := m.GetKey("timeout-ms"); !t.IsNil() {
		if t.AsInt() <= 0 {
			return req, errors.New("shell.exec :timeout-ms must be positive")
		}
		req.timeout = time.Duration(t.AsInt()) * time.Millisecond
	}
	return req, nil
}

// command is the command to run under ctx, with the capability's
// environment plus the call's safe :env and its :stdin.
func (s *shell) command(ctx context.Context, req shellRequest, m *rtfs.Map) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, req.cmd, req.args...)
	cmd.Dir = req.dir
	cmd.Env = slices.Clone(s.env)
	var envErr error
	m.GetKey("env").AsMap().Range(func(k, v rtfs.Value) bool {
		if reason := unsafeEnv(k.Str()); reason != "" {
			envErr = fmt.Errorf("shell.exec :env may not set %s: %s", k.Str(), reason)
			return false
		}
		cmd.Env = append(cmd.Env, k.Str()+"="+v.Str())
		return true
	})
	if envErr != nil {
		return nil, envErr
	}
	if st := m.GetKey("stdin"); !st.IsNil() {
		cmd.Stdin = strings.NewReader(st.Str())
	}
	return cmd, nil
}

// confine resolves p against workdir and refuses anything outside it,
// including through symlinks.
func confine(workdir, p string) (string, error) {
	root, rel, err := (&files{workdir: workdir}).open(p)
	if err != nil {
		return "", err
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, unwrapPathError(err))
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", p)
	}
	return filepath.Join(workdir, rel), nil
}

// stopCause says why ctx ended: own (the handler's own timeout) as it is,
// a deadline of the caller's as a timeout, anything else as a cancellation
// with its cause ("cancelled (iteration skipped by the user)").
func stopCause(ctx context.Context, own error) string {
	cause := context.Cause(ctx)
	switch {
	case cause == own:
		return own.Error()
	case errors.Is(cause, context.DeadlineExceeded):
		if cause == context.DeadlineExceeded {
			return "timed out"
		}
		return cause.Error()
	case cause == nil || cause == context.Canceled:
		return "cancelled"
	}
	return "cancelled (" + cause.Error() + ")"
}

func isFalse(v rtfs.Value) bool { return v.Kind() == rtfs.KindBool && !v.AsBool() }

// unsafeEnv says why a plan may not set an environment variable: these
// change which program an allowed command runs, or make it run other
// code (the allowlist names commands; it is not a sandbox).
func unsafeEnv(name string) string {
	up := strings.ToUpper(name)
	switch {
	case name == "" || strings.ContainsAny(name, "=\x00"):
		return "it is not a valid variable name"
	case up == "PATH" || up == "IFS" || up == "BASH_ENV" || up == "ENV" || up == "SHELLOPTS":
		return "it changes which program runs"
	case strings.HasPrefix(up, "LD_") || strings.HasPrefix(up, "DYLD_"):
		return "it injects code into the program"
	case strings.HasPrefix(up, "GIT_"), strings.HasSuffix(up, "_OPTIONS"), strings.HasSuffix(up, "OPT"),
		up == "PYTHONPATH", up == "PYTHONSTARTUP", up == "PERL5LIB", up == "NODE_PATH", up == "GOFLAGS":
		return "it makes the program load other code or configuration"
	}
	return ""
}
