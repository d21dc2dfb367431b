package batch

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/sandbox"
	"github.com/ralphloop/ralph/stop"
)

// ErrNoWorldCheck refuses a batch whose config has no success condition
// that reads the work tree: its tasks could only be merged on the agent's
// word.
var ErrNoWorldCheck = errors.New("no success condition checks the work tree")

// checker re-runs, on a merged tree, the batch's stop conditions that read
// the work tree (their kinds' rows say FromWorld: a command, a file's
// existence or content, and composites made only of those). The merged
// tree passes when their decision is success: a success condition holds
// and no failure condition does. Conditions that read the run (iterations,
// cost, predicates over its actions) have no meaning on a tree and are
// left to the task's own run.
type checker struct {
	conds []*stop.Condition
	rel   string // the workdir, relative to the repository's top
	// sandboxed makes the sandbox a check in dir runs in (nil: none).
	sandboxed func(dir string) (*sandbox.Sandbox, error)
}

// newChecker builds the checker of cfg, whose workdir is rel below the
// repository's top; sandboxed is nil when cfg runs unsandboxed.
func newChecker(cfg *config.Config, rel string, sandboxed func(dir string) (*sandbox.Sandbox, error)) (*checker, error) {
	var specs []config.Stop
	for _, s := range cfg.Stop {
		if readsWorldOnly(&s) {
			specs = append(specs, s)
		}
	}
	conds, err := stop.FromConfig(specs, cfg.File)
	if err != nil {
		return nil, err // Check accepted the same tables; this is the config's error as it says it
	}
	for _, c := range conds {
		if c.Class == stop.ClassSuccess {
			return &checker{conds: conds, rel: rel, sandboxed: sandboxed}, nil
		}
	}
	return nil, fmt.Errorf("%s: %w, so a task could be merged on the agent's word alone; add a [[stop]] of kind command (the tests), file_exists or file_contains with class success",
		cfg.FileName(), ErrNoWorldCheck)
}

// readsWorldOnly says whether the table s reads only the work tree: its
// kind's row reads the world, or it is a composite of such tables.
func readsWorldOnly(s *config.Stop) bool {
	k, ok := stop.Lookup(s.Kind)
	switch {
	case !ok:
		return false
	case k.Reads == stop.FromWorld:
		return true
	case len(s.Conditions) == 0:
		return false
	}
	for i := range s.Conditions {
		if !readsWorldOnly(&s.Conditions[i]) {
			return false
		}
	}
	return true
}

// check evaluates the conditions in dir (the merged tree's top; the
// workdir below it), in the run's sandbox when it has one. ok says they
// decided success; evidence says, when not, which did not hold and why.
func (c *checker) check(ctx context.Context, dir string) (ok bool, evidence string, err error) {
	workdir := filepath.Join(dir, c.rel)
	if c.sandboxed != nil {
		sbx, err := c.sandboxed(workdir)
		if err != nil {
			return false, "", fmt.Errorf("sandbox the check of the merged tree: %w", err)
		}
		defer sbx.Close()
		ctx = sandbox.With(ctx, sbx)
	}
	ev := stop.NewEvaluator(c.conds, stop.Options{NoCache: true})
	res, err := ev.Evaluate(ctx, stop.Input{Iteration: 1, Workdir: workdir})
	if err != nil {
		return false, "", fmt.Errorf("check the merged tree: %w", err)
	}
	if res.ShouldStop && res.Class == stop.ClassSuccess {
		return true, "", nil
	}
	return false, whyNot(res), nil
}

// whyNot says which conditions kept a merged tree from success: each
// success condition not met and each failure condition met, with its why
// line and the end of its evidence.
func whyNot(ev stop.Evaluation) string {
	var b strings.Builder
	for i := range ev.Results {
		r := &ev.Results[i]
		if r.Met == (r.Class == stop.ClassSuccess) {
			continue
		}
		state := "not met"
		if r.Met {
			state = "met"
		}
		fmt.Fprintf(&b, "%s (%s, %s): %s\n", r.Name, r.Class, state, stop.Why(r))
		if e := tailLines(r.Evidence, 20); e != "" {
			b.WriteString(e + "\n")
		}
	}
	if b.Len() == 0 {
		return "no success condition held on the merged tree"
	}
	return strings.TrimRight(b.String(), "\n")
}

// tailLines is the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// sandboxFor returns the function that makes, for a check in a workdir,
// the sandbox cfg's runs have there (nil when cfg runs unsandboxed).
func sandboxFor(cfg *config.Config, storeDir string, hidden []string) (func(dir string) (*sandbox.Sandbox, error), error) {
	spec, err := assemble.SandboxSpec(cfg)
	if err != nil || spec.Mode == sandbox.Off {
		return nil, err
	}
	return func(dir string) (*sandbox.Sandbox, error) {
		c := *cfg
		c.Loop.Workdir = dir
		b, err := assemble.SandboxBounds(&c, storeDir, hidden)
		if err != nil {
			return nil, err
		}
		return sandbox.New(spec, b, nil)
	}, nil
}
