package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/procgroup"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/sandbox"
)

// HookEvent is what a [[hook]] command gets as JSON on its standard input
// (and as RALPH_* variables, see hookEnv).
type HookEvent struct {
	At        string    `json:"at"`
	Hook      string    `json:"hook"`
	RunID     string    `json:"run_id"`
	Iteration int       `json:"iteration"`
	Time      time.Time `json:"time"`
	Status    string    `json:"status,omitempty"`    // after_iteration, on_error: the iteration's status
	Error     string    `json:"error,omitempty"`     // on_error, after_iteration: what failed
	Class     string    `json:"class,omitempty"`     // on_stop: success | failure | limit | abort
	Condition string    `json:"condition,omitempty"` // on_stop: the stop condition
	Reason    string    `json:"reason,omitempty"`    // on_stop
	CostUSD   float64   `json:"cost_usd"`            // the run's spend so far
	Workdir   string    `json:"workdir"`
	Store     string    `json:"store"`
}

// hookOutputTail bounds the output a HookRan action keeps.
const hookOutputTail = 4 << 10

// CheckHooks refuses hooks whose command cannot be found, before the run
// starts: one sentence naming the config's line.
func CheckHooks(cfg *config.Config) error {
	for _, h := range cfg.Hook {
		if _, err := exec.LookPath(hookPath(cfg, h.Cmd[0])); err != nil {
			return &config.Error{File: cfg.File, Line: h.Line, Msg: fmt.Sprintf("[[hook]] %s: command %q is not found; install it, fix the name or write its path (relative paths start at the workdir)", h.Name, h.Cmd[0])}
		}
	}
	return nil
}

// hookPath resolves a relative path with a slash ("./x.sh") at the workdir.
func hookPath(cfg *config.Config, name string) string {
	if strings.Contains(name, "/") && !strings.HasPrefix(name, "/") {
		return cfg.Loop.Workdir + "/" + name
	}
	return name
}

// runHooks runs the hooks at ev.At, in config order, each recorded as a
// HookRan action under parent; what the run recorded is durable before
// the first and after the last. A failing hook's on_failure decides: warn
// logs it; pause pauses the run (it takes effect at the next gate); and
// fail_iteration makes runHooks return the failure, which fails the
// iteration. err is a recording failure.
func (r *Runner) runHooks(ctx context.Context, st *runState, parent string, ev HookEvent) (fail string, err error) {
	synced := false
	for _, h := range r.o.Config.Hook {
		if h.At != ev.At {
			continue
		}
		if !synced { // a hook is an effect outside the ledger: what led to it is durable first
			if err := r.durable(ctx); err != nil {
				return "", err
			}
			synced = true
		}
		ev.Hook, ev.RunID, ev.Time, ev.CostUSD = h.Name, st.id, r.o.Now(), st.cost
		ev.Workdir, ev.Store = r.o.Config.Loop.Workdir, r.o.Store.Dir()
		if ev.Iteration == 0 {
			ev.Iteration = st.iteration
		}
		exit, out, dur, herr := r.runHook(ctx, h, ev)
		a := &ledger.Action{Type: ledger.HookRan, ParentActionID: parent, FunctionName: h.Name, Success: herr == nil,
			DurationMS: dur.Milliseconds(), Metadata: map[string]rtfs.Value{
				"at": rtfs.String(h.At), "exit": rtfs.String(strconv.Itoa(exit)), "cmd": rtfs.String(strings.Join(h.Cmd, " ")),
				"on_failure": rtfs.String(h.OnFailure), "output": rtfs.String(tail(out, hookOutputTail)),
				"iteration": rtfs.Int(int64(ev.Iteration)),
			}}
		if herr != nil {
			a.ErrorMessage = herr.Error()
		}
		if _, err := r.record(ctx, st, a); err != nil {
			return "", err
		}
		if herr == nil {
			continue
		}
		switch h.OnFailure {
		case "pause":
			r.log.Warn("hook failed; the run pauses (resume it from ralph attach)", "hook", h.Name, "at", h.At, "err", herr)
			r.Pause()
		case "fail_iteration":
			r.log.Warn("hook failed; the iteration fails", "hook", h.Name, "at", h.At, "err", herr)
			if fail == "" {
				fail = herr.Error()
			}
		default:
			r.log.Warn("hook failed", "hook", h.Name, "at", h.At, "err", herr)
		}
	}
	if synced { // the HookRan actions are on disk before whatever comes next (a stop check's command)
		if err := r.durable(ctx); err != nil {
			return "", err
		}
	}
	return fail, nil
}

// runHook runs one hook as shell.exec runs a command: argv with no shell,
// in the workdir, with a timeout that kills its whole process group, its
// output capped; the event as JSON on stdin and RALPH_* in its environment.
// A run's abort does not cut a hook short (on_stop must run as the run ends);
// its timeout does.
func (r *Runner) runHook(ctx context.Context, h config.Hook, ev HookEvent) (exit int, out string, dur time.Duration, err error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return -1, "", 0, err
	}
	timedOut := fmt.Errorf("timed out after %s", h.Timeout.Duration)
	hctx, cancel := context.WithTimeoutCause(context.WithoutCancel(ctx), h.Timeout.Duration, timedOut)
	defer cancel()
	cmd := exec.CommandContext(hctx, hookPath(r.o.Config, h.Cmd[0]), h.Cmd[1:]...)
	cmd.Dir = r.o.Config.Loop.Workdir
	cmd.Env = append(os.Environ(), hookEnv(ev)...)
	cmd.Stdin = strings.NewReader(string(body) + "\n")
	buf := procgroup.CappedBuffer{Limit: 1 << 20}
	cmd.Stdout, cmd.Stderr = &buf, &buf
	start := time.Now()
	_, runErr := sandbox.RunContained(hctx, cmd, 2*time.Second, procgroup.StartOptions{})
	dur = time.Since(start)
	exit = -1
	if cmd.ProcessState != nil {
		exit = cmd.ProcessState.ExitCode()
	}
	var exitErr *exec.ExitError
	switch {
	case runErr == nil:
		return exit, buf.String(), dur, nil
	case hctx.Err() != nil:
		err = fmt.Errorf("hook %s %s; its process group was killed", h.Name, context.Cause(hctx))
	case errors.As(runErr, &exitErr):
		err = fmt.Errorf("hook %s exited with status %d", h.Name, exit)
	default:
		err = fmt.Errorf("hook %s could not start %s: %v", h.Name, h.Cmd[0], runErr)
	}
	return exit, buf.String(), dur, err
}

// hookEnv is the event as RALPH_* variables.
func hookEnv(ev HookEvent) []string {
	env := []string{"RALPH_HOOK=" + ev.Hook, "RALPH_HOOK_AT=" + ev.At, "RALPH_RUN_ID=" + ev.RunID,
		"RALPH_ITERATION=" + strconv.Itoa(ev.Iteration), "RALPH_COST_USD=" + strconv.FormatFloat(ev.CostUSD, 'f', 4, 64),
		"RALPH_WORKDIR=" + ev.Workdir, "RALPH_STORE=" + ev.Store}
	for k, v := range map[string]string{"RALPH_STATUS": ev.Status, "RALPH_ERROR": ev.Error, "RALPH_CLASS": ev.Class,
		"RALPH_CONDITION": ev.Condition, "RALPH_REASON": ev.Reason} {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// tail is the last n bytes of s, cut at a rune boundary.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for i := 0; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 {
			return s[i:]
		}
	}
	return s
}

// follow starts the run's Follow, if any, on its events from the head on;
// the func it returns waits for it to finish (ended: the run's closing
// action is recorded, so Follow ends by itself; else it is stopped).
func (r *Runner) follow(ctx context.Context) func(ended bool) {
	if r.o.Follow == nil {
		return func(bool) {}
	}
	fctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := r.o.Follow(fctx, r.bus.Subscribe(fctx, r.o.Store.Head().Seq+1))
	return func(ended bool) {
		defer stop()
		if ended {
			wait := followEndWait
			if ctx.Err() != nil {
				wait = followSignalWait // a signal: ralph ends within 5 s
			}
			select {
			case <-done:
				return
			case <-time.After(wait):
				r.log.Warn("the run's followers did not see its end; stopping them")
			}
		}
		stop()
		<-done
	}
}

// followEndWait bounds how long Run waits for a follower to see the run's
// closing action (it reads the chain, so it normally takes milliseconds)
// and deliver what it has (notify's grace); followSignalWait bounds it
// when a signal ended the run.
const (
	followEndWait    = time.Minute
	followSignalWait = 250 * time.Millisecond
)

// onError runs the on_error hooks after an iteration that failed (its
// closing action done, which they get the error of).
func (r *Runner) onError(ctx context.Context, st *runState, done *ledger.Action) error {
	if done.Success || st.limited != nil {
		return nil
	}
	_, err := r.runHooks(ctx, st, done.ParentActionID, HookEvent{At: "on_error", Status: done.Metadata["status"].Str(), Error: done.ErrorMessage})
	return err
}

// hookFailedIteration closes an iteration a before_iteration hook failed
// (on_failure = "fail_iteration"): no plan is asked for; the iteration
// counts as failed, with the hook's error as its feedback. It spent
// nothing, so the budget projection (the mean of iterations that ran) leaves
// it out.
func (r *Runner) hookFailedIteration(ctx context.Context, st *runState, iterID string, begin uint64, t0 time.Time, fail string) (uint64, error) {
	st.failures++
	st.feedback = arbiter.Feedback{Iteration: st.iteration, Status: "failed", Failures: []string{r.o.Orchestrator.Redact(fail)}}
	dur := r.o.Now().Sub(t0).Milliseconds()
	done := &ledger.Action{Type: ledger.IterationCompleted, ParentActionID: iterID, FunctionName: fmt.Sprintf("iteration %d", st.iteration),
		Success: false, ErrorMessage: fail, DurationMS: dur,
		Result: rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("status"), rtfs.Keyword("failed"), rtfs.Keyword("cost"), rtfs.Float(0),
			rtfs.Keyword("tokens"), rtfs.Int(0), rtfs.Keyword("duration-ms"), rtfs.Int(dur))),
		Metadata: map[string]rtfs.Value{"iteration": rtfs.Int(int64(st.iteration)), "status": rtfs.String("failed"), "hook": rtfs.String("before_iteration")}}
	if err := r.endIteration(ctx, st, done); err != nil {
		return 0, err
	}
	if _, err := r.record(ctx, st, done); err != nil {
		return 0, err
	}
	if err := r.durable(ctx); err != nil {
		return 0, err
	}
	return begin, r.onError(ctx, st, done)
}
