package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
)

func newIRCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ir",
		Short: "Compile JSON IR to RTFS, or derive a plan's canonical JSON IR",
		Long: `JSON IR is the plan format the arbiter's Mode B asks a model for:
{"steps": [{"id", "name", "capability", "args", "deps", "options"}]}.

  ralph ir compile FILE|-   validate JSON IR and print the RTFS plan it compiles to
  ralph ir canon FILE|-     print the canonical JSON IR of an RTFS plan

docs/arbiter.md describes both formats.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newIRCompileCmd(), newIRCanonCmd())
	return cmd
}

func oneInput(name string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageErrorf("%s takes one FILE, or - to read standard input; got %d arguments", name, len(args))
		}
		return nil
	}
}

func newIRCompileCmd() *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "compile FILE|-",
		Short: "Validate JSON IR and print the RTFS plan it compiles to",
		Long: `Validate JSON IR against the capabilities (ids, deps, cycles, args by schema,
options), sort it topologically (ties keep declaration order) and print the
RTFS plan it compiles to: one step per layer, independent steps of a layer
in step-parallel.

Capabilities are the built-in ones, plus those the config adds (--config, or
./ralph.toml when present). Exit status 2 lists every problem, one per line,
as FILE: path: message; fix.`,
		Example: `  ralph ir compile plan.json
  echo '{"steps": [{"id": "hi", "name": "Hi", "capability": ":ccos.echo", "args": {"message": "hi"}}]}' | ralph ir compile -`,
		Args: oneInput("ir compile"),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, name, err := readInput(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			cfg, err := loadConfig(cfgPath)
			if err != nil {
				return err
			}
			eng, err := offlineEngine(cfg)
			if err != nil {
				return err
			}
			defer eng.Store.Close()
			plan, err := arbiter.CompileIR([]byte(src), eng.Registry)
			var ie *arbiter.IRError
			if errors.As(err, &ie) {
				return exitError(ExitUsage, errors.New(ie.Listing(name)))
			}
			if err != nil {
				return exitError(ExitUsage, err)
			}
			return writeOut(cmd.OutOrStdout(), plan)
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "config `FILE` whose capabilities to use (default ./ralph.toml when present)")
	return cmd
}

func newIRCanonCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "canon FILE|-",
		Short: "Print the canonical JSON IR of an RTFS plan",
		Long: `Read an RTFS plan and print its canonical JSON IR: one entry per step, in
source order, with its capability call and args, deps inferred from order and
parallel layers, and its metadata as options. The same plan always gives the
same IR, byte for byte.`,
		Example: `  ralph ir canon plan.rtfs
  ralph ir canon - < plan.rtfs | jq '.steps[].id'`,
		Args: oneInput("ir canon"),
		RunE: func(cmd *cobra.Command, args []string) error {
			forms, err := readForms(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			return writeOut(cmd.OutOrStdout(), arbiter.Canonicalize(forms).Indent()+"\n")
		},
	}
}

// offlineEngine is the engine of cfg for commands that only read
// capability specs: it builds no model (so it needs no API key), and
// registers llm.ask over a model that refuses every call when cfg's
// provider would have one.
func offlineEngine(cfg *config.Config) (*assemble.Engine, error) {
	c := *cfg
	withModel := c.Model.Provider == "openai" || c.Model.Provider == "command"
	c.Model.Provider = "static"
	eng, err := memoryEngine(&c)
	if err != nil || !withModel {
		return eng, err
	}
	if err := arbiter.RegisterLLMAsk(eng.Registry, arbiter.Offline{}); err != nil {
		eng.Store.Close()
		return nil, exitError(ExitFailure, err)
	}
	return eng, nil
}

// memoryEngine wires the engine over an in-memory store, for commands that
// need the capabilities and the constitution but record nothing.
func memoryEngine(cfg *config.Config) (*assemble.Engine, error) {
	st, err := assemble.InMemory()
	if err != nil {
		return nil, exitError(ExitFailure, err)
	}
	eng, err := assemble.PlanEngine(cfg, st)
	if err != nil {
		st.Close()
		return nil, setupError(err)
	}
	return eng, nil
}
