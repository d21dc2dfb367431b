package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/stop"
)

func newSubmitCmd() *cobra.Command {
	var natsFlag, workspace string
	cmd := &cobra.Command{
		Use:   "submit CONFIG [--nats URL] [--workspace GIT_URL[@REF]]",
		Short: "Queue a run on the fleet; print its run id",
		Long: `Check CONFIG as 'ralph run' would (its syntax, stop conditions, and a static or
agent plan admitted by governance), check that the files it names are in the
workspace, then queue the run for the fleet's workers and print its run id
alone on standard output (id=$(ralph submit ...) works).

--workspace GIT_URL[@REF] is the git repository the run works in: each run gets
a fresh clone on its own branch ralph/RUN_ID, from REF (a branch, tag or
commit; default the remote's HEAD), and every iteration is committed and
pushed there. The config's paths are read relative to where CONFIG sits in
its repository. Submit checks REF's files with a shallow fetch into a
temporary directory, and queues the commit it checked. Without --workspace
the run starts in an empty directory, so a config that names a file is
refused.

What only a worker's machine can check (the API key, the agent CLI on its
PATH, model.command) is checked by the worker that takes the run.

Nothing is queued when a check fails. Exit status: 0 queued, 2 a bad config,
plan or workspace, or no NATS server at the URL (--nats, else RALPH_NATS,
else nats://127.0.0.1:4222), 1 the fleet failed to queue it.`,
		Example: `  ralph submit ralph.toml --workspace git@github.com:me/project.git@main
  id=$(ralph submit ralph.toml --nats nats://10.0.0.5:4222 --workspace https://git.example.com/p.git)`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("submit takes one CONFIG (a ralph.toml), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSubmit(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], workspace, natsURL(natsFlag))
		},
	}
	cmd.Flags().StringVar(&natsFlag, "nats", "", "NATS `URL` of the fleet, comma-separated for a cluster (default RALPH_NATS, then "+defaultNATS+")")
	addNATSAuthFlags(cmd)
	cmd.Flags().StringVar(&workspace, "workspace", "", "the run's git repository `GIT_URL[@REF]`: each run gets a fresh clone on branch ralph/RUN_ID (default: an empty directory)")
	return cmd
}

func runSubmit(ctx context.Context, out, errOut io.Writer, cfgPath, workspace, natsAt string) error {
	cfg, err := config.Load(cfgPath, nil) // config errors name file:line:col, as ralph run's do
	if err != nil {
		return exitError(ExitUsage, err)
	}
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return exitError(ExitUsage, fmt.Errorf("read config %s: %w", cfgPath, err))
	}
	if err := cfg.RefuseCredential(string(data)); err != nil {
		return exitError(ExitUsage, err)
	}
	job := fleet.Job{RunID: loop.NewID(), Config: string(data), ConfigPath: fleet.DefaultConfigPath}
	if cfg.Agent != nil {
		job.Agent = cfg.Agent.CLI
	}
	var tree workspaceTree = emptyWorkspace{}
	if workspace != "" {
		u, ref, err := splitWorkspace(workspace)
		if err != nil {
			return exitError(ExitUsage, err)
		}
		job.Workspace = u
		if job.ConfigPath, err = configInRepo(cfgPath); err != nil {
			return exitError(ExitUsage, err)
		}
		clone, err := fetchWorkspace(ctx, u, ref)
		if err != nil {
			return err
		}
		defer clone.remove()
		job.Ref, tree = clone.sha, clone
	}
	if err := checkJobConfig(ctx, cfg, job.ConfigPath, tree); err != nil {
		return err
	}
	// The fleet must have its streams (a worker makes them); the job goes
	// to the keeper, signed.
	nc, _, err := openFleet(ctx, natsAt, "ralph submit")
	if err != nil {
		return err
	}
	defer nc.Close()
	signer, err := fleetSigner(ctx)
	if err != nil {
		return err
	}
	if err := fleet.Submit(ctx, nc, signer, job); err != nil {
		var refused *fleet.RefusedError
		if errors.As(err, &refused) {
			return exitError(ExitUsage, fmt.Errorf("the fleet at %s refused run %s: %w", natsAt, job.RunID, err))
		}
		return exitError(ExitFailure, fmt.Errorf("queue run %s on the fleet at %s: %w; `ralph runs --nats %s` shows whether it was queued before you submit again", job.RunID, natsAt, err, natsAt))
	}
	if err := writeOut(out, job.RunID+"\n"); err != nil {
		return err
	}
	where := "an empty directory"
	if job.Workspace != "" {
		where = fmt.Sprintf("%s at %s, on branch ralph/%s", job.Workspace, shortSHA(job.Ref), job.RunID)
	}
	// Best effort: the run id, what matters, is already on stdout.
	signIn := ""
	if c := signInFrom(ctx).CredsFile(); c != "" && os.Getenv("RALPH_NATS_CREDS") != c {
		signIn = " --creds " + c // the submitter's credentials read states and chains too
	}
	fmt.Fprintf(errOut, "queued run %s on %s (works in %s); `ralph runs --nats %s%s` lists it, `ralph attach --nats %s%s %s` follows it once a worker takes it\n",
		job.RunID, natsAt, where, natsAt, signIn, natsAt, signIn, job.RunID)
	return nil
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	if s == "" {
		return "its HEAD"
	}
	return s
}

// splitWorkspace reads GIT_URL[@REF]. The ref is what follows the last @,
// unless that @ belongs to the URL: a user name (ssh://git@host/r,
// git@host:r) or a path. A local path is made absolute, so a worker on
// this machine finds it from any directory.
func splitWorkspace(s string) (gitURL, ref string, err error) {
	gitURL = s
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		u, r := s[:i], s[i+1:]
		userinfo := strings.Contains(u, "://") && !strings.Contains(u[strings.Index(u, "://")+3:], "/")
		if !userinfo && !strings.Contains(r, ":") && u != "" && !strings.HasSuffix(u, "/") {
			gitURL, ref = u, r
			if ref == "" {
				return "", "", fmt.Errorf("--workspace %s names no ref after @; give a branch, tag or commit, or drop the @", s)
			}
		}
	}
	if strings.HasPrefix(ref, "-") || strings.HasPrefix(gitURL, "-") {
		return "", "", fmt.Errorf("--workspace %s starts with '-', which git would read as an option; give a git URL and a branch, tag or commit", s)
	}
	if u, perr := url.Parse(gitURL); perr == nil && u.User != nil {
		if _, hasPassword := u.User.Password(); hasPassword || (u.Scheme == "http" || u.Scheme == "https") && u.User.Username() != "" {
			return "", "", fmt.Errorf("--workspace %s carries a credential, which would be stored with the run; give the URL without it and let the workers' git credential helper or SSH key authenticate", redactURL(u))
		}
	}
	if fi, serr := os.Stat(gitURL); serr == nil && fi.IsDir() {
		if abs, aerr := filepath.Abs(gitURL); aerr == nil {
			gitURL = abs
		}
	}
	return gitURL, ref, nil
}

func redactURL(u *url.URL) string {
	c := *u
	c.User = url.User("xxxxx")
	return c.String()
}

// configInRepo is where CONFIG sits in its git repository ("ralph.toml" at
// the root): the run reads it from the same place in its clone, so the
// paths it names resolve the same way. A config outside any repository
// is taken to sit at the workspace's root.
func configInRepo(cfgPath string) (string, error) {
	abs, err := filepath.Abs(cfgPath)
	if err != nil {
		return "", fmt.Errorf("config %s: %w", cfgPath, err)
	}
	top, err := exec.Command("git", "-C", filepath.Dir(abs), "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return filepath.Base(abs), nil
	}
	root, err := filepath.EvalSymlinks(strings.TrimSpace(string(top)))
	if err != nil {
		return filepath.Base(abs), nil
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return filepath.Base(abs), nil
	}
	rel, err := filepath.Rel(root, filepath.Join(dir, filepath.Base(abs)))
	if err != nil || strings.HasPrefix(rel, "..") {
		return filepath.Base(abs), nil
	}
	return filepath.ToSlash(rel), nil
}

// workspaceTree is the tree a submitted run starts in, as submit sees it.
type workspaceTree interface {
	// stat says whether rel (slash-separated, relative to the root) is a
	// file or a directory there.
	stat(rel string) (exists, isDir bool)
	// read reads the file rel.
	read(rel string) ([]byte, error)
	// local is rel as a path on this machine ("" when there is no tree).
	local(rel string) string
	// describe names the tree in messages, missing says how to fix a
	// missing file.
	describe() string
	missing(rel string) string
}

// emptyWorkspace is the directory a run without --workspace starts in.
type emptyWorkspace struct{}

func (emptyWorkspace) stat(rel string) (bool, bool) { return rel == ".", true }
func (emptyWorkspace) read(string) ([]byte, error)  { return nil, os.ErrNotExist }
func (emptyWorkspace) local(string) string          { return "" }
func (emptyWorkspace) describe() string             { return "the run's directory" }
func (emptyWorkspace) missing(rel string) string {
	return fmt.Sprintf("without --workspace the run starts in an empty directory, which has no %s; pass --workspace GIT_URL[@REF] of a repository that holds it", rel)
}

// workspaceClone is REF of a workspace, fetched into a temporary directory.
type workspaceClone struct {
	url, ref, sha, dir string
}

func (c *workspaceClone) stat(rel string) (bool, bool) {
	fi, err := os.Stat(c.local(rel))
	if err != nil {
		return false, false
	}
	return true, fi.IsDir()
}

func (c *workspaceClone) read(rel string) ([]byte, error) { return os.ReadFile(c.local(rel)) }
func (c *workspaceClone) local(rel string) string {
	return filepath.Join(c.dir, filepath.FromSlash(rel))
}
func (c *workspaceClone) remove() { _ = os.RemoveAll(c.dir) } // a temporary copy; nothing depends on it
func (c *workspaceClone) describe() string {
	return fmt.Sprintf("workspace %s at %s", c.url, c.refName())
}

func (c *workspaceClone) refName() string {
	if c.ref == "" {
		return "HEAD"
	}
	return c.ref
}

func (c *workspaceClone) missing(rel string) string {
	return fmt.Sprintf("%s has no %s; commit and push it there, or fix the path", c.describe(), rel)
}

// fetchWorkspace fetches ref of the repository at gitURL (its HEAD when
// ref is "") into a temporary directory: only that commit, with a shallow
// fetch, or, for a commit no branch names, the whole repository.
func fetchWorkspace(ctx context.Context, gitURL, ref string) (*workspaceClone, error) {
	dir, err := os.MkdirTemp("", "ralph-submit-")
	if err != nil {
		return nil, exitError(ExitFailure, fmt.Errorf("make a directory to check the workspace in: %w", err))
	}
	c := &workspaceClone{url: gitURL, ref: ref, dir: dir}
	fail := func(err error) (*workspaceClone, error) {
		c.remove()
		return nil, err
	}
	if _, err := gitx.Run(ctx, dir, "init", "--quiet"); err != nil {
		return fail(exitError(ExitFailure, fmt.Errorf("git init: %w; is git installed?", err)))
	}
	want := ref
	if want == "" {
		want = "HEAD"
	}
	_, err = gitx.Run(ctx, dir, "fetch", "--quiet", "--depth", "1", "--end-of-options", gitURL, want)
	if err != nil && isHexRef(ref) { // a commit: some servers serve it only with its history
		if _, ferr := gitx.Run(ctx, dir, "fetch", "--quiet", "--end-of-options", gitURL, "+refs/heads/*:refs/remotes/ws/*", "+refs/tags/*:refs/tags/*"); ferr == nil {
			if _, verr := gitx.Run(ctx, dir, "rev-parse", "--verify", "--quiet", ref+"^{commit}"); verr == nil {
				err = nil
				want = ref
			}
		}
	} else if err == nil {
		want = "FETCH_HEAD"
	}
	if err != nil {
		what := "ref " + want
		if ref == "" {
			what = "HEAD"
		}
		return fail(exitError(ExitUsage, fmt.Errorf("cannot fetch %s of workspace %s (%s); check the URL and the branch, tag or commit after @, and that this machine can reach it", what, gitURL, gitMessage(err))))
	}
	sha, err := gitx.Run(ctx, dir, "rev-parse", "--verify", "--quiet", want+"^{commit}")
	if err != nil {
		return fail(exitError(ExitUsage, fmt.Errorf("%s of workspace %s is not a commit; give a branch, tag or commit after @", want, gitURL)))
	}
	if _, err := gitx.Run(ctx, dir, "checkout", "--quiet", "--detach", sha); err != nil {
		return fail(exitError(ExitFailure, fmt.Errorf("check out %s of workspace %s: %s", sha, gitURL, gitMessage(err))))
	}
	c.sha = sha
	return c, nil
}

func isHexRef(s string) bool {
	if len(s) < 7 || len(s) > 64 {
		return false
	}
	return strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

// gitMessage is git's complaint in one clause, for a sentence of ours.
func gitMessage(err error) string { return strings.TrimSuffix(gitx.Message(err), ".") }

// checkJobConfig checks what ralph run checks before it opens a store, for
// a run whose config sits at cfgRel in tree: stop conditions, intent
// params, the files the config names (in tree, not on this machine), and
// the plan every iteration would run, admitted by governance.
func checkJobConfig(ctx context.Context, cfg *config.Config, cfgRel string, tree workspaceTree) error {
	// Every path the config names, as a path in the tree; the plan check
	// below reads the files from there.
	wcfg := *cfg
	if cfg.Agent != nil {
		a := *cfg.Agent
		wcfg.Agent = &a
	}
	inTree := func(keys []config.PathKey) error { return treePaths(cfg, cfgRel, tree, keys) }
	if _, err := assemble.Check(&wcfg, assemble.CheckOptions{Paths: inTree}); err != nil {
		return setupError(err)
	}
	return checkJobPlan(ctx, cfg, &wcfg, cfgRel, tree)
}

// treePaths checks each of the config's path keys as a path in the
// run's workspace tree, and points it at the file this machine holds of
// it (where the plan check reads it).
func treePaths(cfg *config.Config, cfgRel string, tree workspaceTree, keys []config.PathKey) error {
	for _, k := range keys {
		rel, err := treePath(cfg, cfgRel, *k.Path)
		if err != nil {
			return cfg.ErrorAt(k.Key, fmt.Sprintf("%s %s", k.Key, err))
		}
		exists, isDir := tree.stat(rel)
		switch {
		case !exists:
			return cfg.ErrorAt(k.Key, fmt.Sprintf("%s %s is not in the run's workspace: %s", k.Key, rel, tree.missing(rel)))
		case k.Dir && !isDir:
			return cfg.ErrorAt(k.Key, fmt.Sprintf("%s %s is not a directory in %s; fix the path", k.Key, rel, tree.describe()))
		case !k.Dir && isDir:
			return cfg.ErrorAt(k.Key, fmt.Sprintf("%s %s is a directory in %s, not a file; fix the path", k.Key, rel, tree.describe()))
		}
		if l := tree.local(rel); l != "" {
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
func checkJobPlan(ctx context.Context, cfg, wcfg *config.Config, cfgRel string, tree workspaceTree) error {
	if cfg.Model.Provider != "static" && cfg.Model.Provider != "agent" {
		return nil
	}
	st, err := ledger.Open(ledger.Options{InMemory: true})
	if err != nil {
		return exitError(ExitFailure, err)
	}
	defer st.Close()
	cli := ""
	if cfg.Agent != nil {
		// The worker resolves "auto" on its own PATH; here the configured
		// name decides what governance allows.
		cli = cfg.Agent.CLI
		if name, err := assemble.AgentCLI(cfg); err == nil {
			cli = name
		}
		if cli != "auto" { // a budget that cannot fire is refused here as by run
			if err := assemble.CheckAgentBudget(cfg, cli); err != nil {
				return setupError(err)
			}
		}
	}
	eng, err := assemble.NewEngine(wcfg, st, nil, cli, assemble.EngineOptions{})
	if err != nil {
		return setupError(err)
	}
	if cfg.Model.Provider == "static" {
		src := cfg.Plan.RTFS
		named := *cfg
		if cfg.Plan.File != "" {
			rel, _ := treePath(cfg, cfgRel, cfg.Plan.File) // checked by checkJobConfig
			b, err := os.ReadFile(wcfg.Plan.File)
			if err != nil {
				return exitError(ExitUsage, cfg.ErrorAt("plan.file", fmt.Sprintf("plan.file %s cannot be read from %s: %v", rel, tree.describe(), err)))
			}
			src, named.Plan.File = string(b), rel
		}
		if err := assemble.CheckStaticPlan(&named, eng, src); err != nil {
			return exitError(ExitUsage, err)
		}
		return nil
	}
	p := loop.AgentPlanner{PromptFile: wcfg.AgentPromptFile(), Prompt: cfg.Intent.Goal, MaxIterations: stop.SpecBudgets(cfg.Stop).Iterations}
	if err := assemble.CheckAgentPlan(ctx, eng, p); err != nil {
		return exitError(ExitUsage, err)
	}
	return nil
}
