package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/sandbox"
)

// loadConfig reads --config when given, else ./ralph.toml when it exists,
// else the defaults.
func loadConfig(path string) (*config.Config, error) {
	return loadConfigWith(path, config.Load)
}

// loadExecConfig is loadConfig for exec, which runs the plan it is given
// and so never needs [model] to be able to plan.
func loadExecConfig(path string) (*config.Config, error) {
	return loadConfigWith(path, config.LoadForExec)
}

func loadConfigWith(path string, load func(string, config.Env) (*config.Config, error)) (*config.Config, error) {
	if path == "" {
		if _, err := os.Stat("ralph.toml"); err != nil {
			return config.Default(), nil
		}
		path = "ralph.toml"
	}
	c, err := load(path, nil)
	if err != nil {
		return nil, exitError(ExitUsage, err)
	}
	return c, nil
}

// configArg loads the CONFIG argument of run and plan, or ./ralph.toml,
// which must then exist.
func configArg(args []string) (*config.Config, error) {
	path := "ralph.toml"
	if len(args) == 1 {
		path = args[0]
	} else if _, err := os.Stat(path); err != nil {
		return nil, usageErrorf("no ralph.toml here; create one with `ralph init` or pass CONFIG")
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		return nil, exitError(ExitUsage, err)
	}
	return cfg, nil
}

func newExecCmd() *cobra.Command {
	var cfgPath, store string
	cmd := &cobra.Command{
		Use:   "exec PLAN.rtfs",
		Short: "Run one plan once through governance and the orchestrator",
		Long: `Run one RTFS plan once: admit it through governance, execute it through the
orchestrator, record everything on the causal chain, then print the result
and the action tree.

Exit status: 0 when the plan succeeded, 1 when it failed at run time, 2 when
it was refused at admission or could not be read.`,
		Example: `  ralph exec plan.rtfs
  ralph exec plan.rtfs --config ralph.toml --store /tmp/ralph-store`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("exec takes one PLAN.rtfs file, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExec(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], cfgPath, store)
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "config `FILE` (default ./ralph.toml when present)")
	cmd.Flags().StringVar(&store, "store", "", "store `DIR` (overrides RALPH_STORE and store.dir)")
	return cmd
}

func runExec(ctx context.Context, out, errOut io.Writer, planPath, cfgPath, storeFlag string) error {
	src, err := os.ReadFile(planPath)
	if err != nil {
		return exitError(ExitUsage, err)
	}
	cfg, err := loadExecConfig(cfgPath)
	if err != nil {
		return err
	}
	dir, _, err := assemble.StorePlace(cfg, storeDir(storeFlag, cfg), storeFlag != "")
	if err != nil {
		return setupError(err)
	}
	sbx, eo, err := assemble.ExecSandbox(cfg, dir, []string{ralphKeyFile()})
	if err != nil {
		return setupError(err)
	}
	defer sbx.Close()
	eng, err := assemble.OpenEngine(cfg, storeOpener(cfg, dir, errOut), eo)
	if err != nil {
		return setupError(err)
	}
	st := eng.Store
	defer st.Close()
	ctx = sandbox.With(ctx, sbx)
	params, err := assemble.IntentParams(cfg)
	if err != nil {
		return setupError(err)
	}
	planCtx := rtfs.MapValue(params.AsMap().Assoc(rtfs.Keyword("iteration"), rtfs.Int(1)))
	res, err := eng.Orchestrator.Execute(ctx, loop.PlanInput{File: filepath.Base(planPath), Source: string(src), Ctx: planCtx})
	if res != nil {
		if terr := printPlanTree(out, st, res.PlanID); terr != nil && err == nil {
			err = terr
		}
	}
	switch {
	case errors.Is(err, loop.ErrRefused):
		return exitError(ExitUsage, err)
	case err != nil:
		return exitError(ExitFailure, err)
	case res.Err != nil:
		return evalError(res.Err)
	}
	if n, ok := rtfs.Size(res.Value, rtfs.MaxPrintNodes); !ok {
		return exitError(ExitFailure, fmt.Errorf("the plan's result has more than %d nodes (at least %d) and is too large to print", rtfs.MaxPrintNodes, n))
	}
	return writeOut(out, "result: "+rtfs.Print(res.Value)+"\n")
}

func printPlanTree(w io.Writer, st *ledger.Store, planID string) error {
	acts, err := st.ByPlan(planID)
	if err != nil {
		return err
	}
	return ledger.WriteTree(w, ledger.BuildTree(acts))
}
