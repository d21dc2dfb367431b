package fleetrun

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/internal/gitx"
)

// ForConfig is o with the loop's parts filled in from cfg, whose file's
// text is text: the config, where it lies in its repository, its agent
// CLI, and the workspace: o.Workspace as --workspace gives it (a URL or a
// path, without @REF: every task starts from the target's tip), or, when
// it is "", the repository that holds the config, by path (for workers
// on this machine).
func ForConfig(o Options, cfg *config.Config, text string) (Options, error) {
	o.Config = text
	if cfg.Agent != nil {
		o.Agent = cfg.Agent.CLI
	}
	var err error
	if o.ConfigPath, err = fleet.ConfigInRepo(cfg.File); err != nil {
		return o, err
	}
	if o.Workspace == "" {
		top, err := gitx.Run(context.Background(), filepath.Dir(cfg.File), "rev-parse", "--show-toplevel")
		if err != nil {
			return o, fmt.Errorf("%s is not in a git repository, and a backlog's tasks start from one of its commits: run ralph submit --tasks in your repository", cfg.File)
		}
		o.Workspace = top
		return o, nil
	}
	url, ref, err := fleet.SplitWorkspace(o.Workspace)
	if err != nil {
		return o, err
	}
	if ref != "" {
		return o, fmt.Errorf("--workspace %s names a ref, but each task starts from the target branch's tip: give the repository's URL alone", o.Workspace)
	}
	o.Workspace = url
	return o, nil
}
