package assemble

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

// JobTree is the tree a submitted run starts in, as the submitter sees it:
// its workspace at the commit queued (fleet.Checkout), or an empty
// directory (fleet.EmptyWorkspace).
type JobTree interface {
	// Stat says whether rel (slash-separated, relative to the root) is a
	// file or a directory there.
	Stat(rel string) (exists, isDir bool)
	// Local is rel as a path on this machine ("" when there is no tree).
	Local(rel string) string
	// Describe names the tree in messages, Missing says how to fix a
	// missing file.
	Describe() string
	Missing(rel string) string
}

// CheckJob checks what ralph run checks before it opens a store, for a run
// whose config sits at cfgRel in tree: Check (stop conditions, intent
// params, the files the config names, in tree rather than on this
// machine), then the plan every iteration of a static or agent loop would
// run, admitted by governance in an engine over the store open makes (in
// memory: nothing is recorded).
func CheckJob(ctx context.Context, cfg *config.Config, cfgRel string, tree JobTree, open Opener) error {
	// Every path the config names, as a path in the tree; the plan check
	// below reads the files from there.
	wcfg := *cfg
	if cfg.Agent != nil {
		a := *cfg.Agent
		wcfg.Agent = &a
	}
	inTree := func(keys []config.PathKey) error { return treePaths(cfg, cfgRel, tree, keys) }
	if _, err := Check(&wcfg, CheckOptions{Paths: inTree}); err != nil {
		return err
	}
	return checkJobPlan(ctx, cfg, &wcfg, cfgRel, tree, open)
}

// treePaths checks each of the config's path keys as a path in the
// run's workspace tree, and points it at the file this machine holds of
// it (where the plan check reads it).
func treePaths(cfg *config.Config, cfgRel string, tree JobTree, keys []config.PathKey) error {
	for _, k := range keys {
		rel, err := treePath(cfg, cfgRel, *k.Path)
		if err != nil {
			return cfg.ErrorAt(k.Key, fmt.Sprintf("%s %s", k.Key, err))
		}
		exists, isDir := tree.Stat(rel)
		switch {
		case !exists:
			return cfg.ErrorAt(k.Key, fmt.Sprintf("%s %s is not in the run's workspace: %s", k.Key, rel, tree.Missing(rel)))
		case k.Dir && !isDir:
			return cfg.ErrorAt(k.Key, fmt.Sprintf("%s %s is not a directory in %s; fix the path", k.Key, rel, tree.Describe()))
		case !k.Dir && isDir:
			return cfg.ErrorAt(k.Key, fmt.Sprintf("%s %s is a directory in %s, not a file; fix the path", k.Key, rel, tree.Describe()))
		}
		if l := tree.Local(rel); l != "" {
			*k.Path = l
		}
	}
	return nil
}

// treePath is the config's path p (made absolute against the config's
// directory on this machine) as a slash path in the workspace, where the
// config sits at cfgRel.
func treePath(cfg *config.Config, cfgRel, p string) (string, error) {
	rel, err := filepath.Rel(filepath.Dir(cfg.File), p)
	if err != nil {
		return "", fmt.Errorf("%s cannot be a path in the workspace; give a path relative to the config", p)
	}
	r := path.Join(path.Dir(cfgRel), filepath.ToSlash(rel))
	if r == ".." || strings.HasPrefix(r, "../") {
		return "", fmt.Errorf("%s is outside the run's workspace; give a path inside the repository, relative to the config", p)
	}
	return r, nil
}

// checkJobPlan admits the plan every iteration of a static or agent loop
// runs, as ralph run does before it opens its store; wcfg is cfg with
// its paths in the workspace. The engine has no model: the API key and
// model.command are the worker's, and neither static nor agent plans
// reach a model.
func checkJobPlan(ctx context.Context, cfg, wcfg *config.Config, cfgRel string, tree JobTree, open Opener) error {
	if cfg.Model.Provider != "static" && cfg.Model.Provider != "agent" {
		return nil
	}
	st, err := open()
	if err != nil {
		return err
	}
	defer st.Close()
	cli := ""
	if cfg.Agent != nil {
		// The worker resolves "auto" on its own PATH; here the configured
		// name decides what governance allows.
		cli = cfg.Agent.CLI
		if name, err := AgentCLI(cfg); err == nil {
			cli = name
		}
		if cli != agent.Auto { // a budget that cannot fire is refused here as by run
			if err := CheckAgentBudget(cfg, cli); err != nil {
				return err
			}
		}
	}
	eng, err := NewEngine(wcfg, st, nil, cli, EngineOptions{})
	if err != nil {
		return err
	}
	if cfg.Model.Provider == "static" {
		src := cfg.Plan.RTFS
		named := *cfg
		if cfg.Plan.File != "" {
			rel, _ := treePath(cfg, cfgRel, cfg.Plan.File) // checked by CheckJob
			b, err := os.ReadFile(wcfg.Plan.File)
			if err != nil {
				return configError(cfg.ErrorAt("plan.file", fmt.Sprintf("plan.file %s cannot be read from %s: %v", rel, tree.Describe(), err)))
			}
			src, named.Plan.File = string(b), rel
		}
		return configError(CheckStaticPlan(&named, eng, src))
	}
	p := loop.AgentPlanner{PromptFile: wcfg.AgentPromptFile(), Prompt: cfg.Intent.Goal, MaxIterations: stop.SpecBudgets(cfg.Stop).Iterations}
	return configError(CheckAgentPlan(ctx, eng, p))
}
