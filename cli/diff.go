package cli

import (
	"bufio"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/loop"
)

// diffFlags are ralph diff's flags.
type diffFlags struct {
	store        string
	stat, asJSON bool
}

func newDiffCmd() *cobra.Command {
	var f diffFlags
	cmd := &cobra.Command{
		Use:   "diff RUN_ID [ITERATION]",
		Short: "Show what an iteration changed in the work tree",
		Long: `Show what iteration ITERATION of a run changed in its work tree: git's diff
between the checkpoints before and after it (refs/ralph/RUN_ID/N). Without
ITERATION, one line per iteration with its files and +added −deleted lines.
--stat prints git's diffstat instead of the patch; --json prints, per
iteration, the files and their line counts.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageErrorf("diff takes RUN_ID and an optional ITERATION, got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd, args) },
	}
	cmd.Flags().StringVar(&f.store, "store", "", "store `DIR` (overrides RALPH_STORE and store.dir)")
	cmd.Flags().BoolVar(&f.stat, "stat", false, "git's diffstat instead of the patch")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "one JSON object per iteration: files and line counts")
	return cmd
}

// run prints the diff of the iteration args name, or a line (or a JSON
// object) per iteration.
func (f *diffFlags) run(cmd *cobra.Command, args []string) error {
	ctx := cmd.Context()
	acts, err := runActions(ctx, f.store, "", runRefArg(args, 0), cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	rc, err := loop.ReadCheckpoints(loop.RunIDOf(acts, args[0]), acts)
	if err != nil {
		return commandError(err)
	}
	if _, _, err := rc.Need(ctx); err != nil { // no checkpoints, no work tree
		return commandError(err)
	}
	iters, err := diffIterations(args, rc)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(cmd.OutOrStdout())
	defer w.Flush()
	for _, n := range iters {
		if err := f.writeIteration(cmd, w, rc, n, len(args) == 2); err != nil {
			return err
		}
	}
	return nil
}

// diffIterations is the iteration args name, else every iteration.
func diffIterations(args []string, rc *loop.RunCheckpoints) ([]int, error) {
	if len(args) != 2 {
		var iters []int
		for n := 1; n <= rc.Last; n++ {
			iters = append(iters, n)
		}
		return iters, nil
	}
	n, err := parseIteration(args[1])
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, usageErrorf("iteration 0 is the state before the run and changed nothing; diff iterations 1 to %d", max(rc.Last, 1))
	}
	return []int{n}, nil
}

// writeIteration writes iteration n's change: the patch (or diffstat)
// when it is the one asked for, else its JSON object or its line.
func (f *diffFlags) writeIteration(cmd *cobra.Command, w *bufio.Writer, rc *loop.RunCheckpoints, n int, one bool) error {
	ctx := cmd.Context()
	repo, cs, err := rc.Need(ctx, n-1, n)
	if err != nil {
		return commandError(err)
	}
	if one && !f.asJSON {
		if err := repo.Diff(ctx, w, cs[0], cs[1], f.stat, false); err != nil {
			return exitError(ExitFailure, err)
		}
		return nil
	}
	d, err := rc.Change(ctx, n)
	if err != nil {
		return commandError(err)
	}
	if f.asJSON {
		b, _ := json.Marshal(d) // strings and numbers cannot fail to marshal
		w.Write(append(b, '\n'))
		return nil
	}
	fmt.Fprintf(w, "iteration %-3d %s  +%d −%d  %d file(s)", n, short(d.To), d.Added, d.Deleted, len(d.Files))
	for i, file := range d.Files {
		if i == 4 {
			fmt.Fprintf(w, " …")
			break
		}
		fmt.Fprintf(w, " %s", file.Path)
	}
	fmt.Fprintln(w)
	return nil
}

func short(h string) string {
	if len(h) > 10 {
		return h[:10]
	}
	return h
}
