package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/detach"
	"github.com/ralphloop/ralph/loop"
)

// absDir is dir made absolute for messages (as given when that fails).
func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// detachedArgs are the arguments of the `ralph run` that runs run id in
// the background: args and the flags f set, headless, logging to the store.
func detachedArgs(args []string, f runFlags, id string) []string {
	child := append([]string{"run"}, args...)
	child = append(child, "--no-tui", "--log-to-store", "--run-id="+id)
	for _, fl := range []struct {
		name, value string
		set         bool
	}{
		{"json", "", f.asJSON}, {"verbose", "", f.verbose}, {"provider", f.provider, f.provider != ""},
		{"model", f.model, f.model != ""}, {"store", f.store, f.store != ""}, {"sandbox", f.sandbox, f.sandbox != ""},
		{"max-iterations", strconv.Itoa(f.maxIterations), f.maxIterations > 0},
	} {
		switch {
		case fl.set && fl.value == "":
			child = append(child, "--"+fl.name)
		case fl.set:
			child = append(child, "--"+fl.name+"="+fl.value)
		}
	}
	return child
}

// startDetached starts `ralph run` again as a background process in its
// own session (setsid: the terminal closing does not reach it), with the
// run id chosen here. Until that process has opened the store and sent its
// output to the run's log file, its output comes back here, so a config or
// store that fails is reported as a foreground run reports it.
func startDetached(cmd *cobra.Command, cfg *config.Config, args []string, f runFlags) error {
	if f.approve {
		return usageErrorf("--approve asks on a terminal, which a detached run has not; run without --detach, or without --approve")
	}
	exe, err := os.Executable()
	if err != nil {
		return exitError(ExitFailure, fmt.Errorf("find the ralph executable to start in the background: %w", err))
	}
	id := loop.NewID()
	bg, err := detach.Start(exe, detachedArgs(args, f, id))
	if err != nil {
		return exitError(ExitFailure, err)
	}
	logPath := detach.LogPath(absDir(storeDir(f.store, cfg)), id)
	if bg.Exited {
		code := bg.Code
		if len(bg.Early) > 0 || code == ExitUsage { // it never got to its log
			cmd.ErrOrStderr().Write(bg.Early)
			return exitError(code, silentError{})
		}
		return writeOut(cmd.OutOrStdout(), fmt.Sprintf("run %s ran in the background and has already ended (exit %d); its output is in %s\nralph view %s\n",
			id, code, logPath, id))
	}
	cmd.ErrOrStderr().Write(bg.Early) // warnings it gave on the way
	return writeOut(cmd.OutOrStdout(), fmt.Sprintf("run %s started in the background (pid %d); its output goes to %s\nralph attach %s\n",
		id, bg.PID, logPath, id))
}
