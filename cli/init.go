package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/config"
)

func newInitCmd() *cobra.Command {
	var agentCLI, test string
	var fullAccess bool
	cmd := &cobra.Command{
		Use:   "init [DIR] [--agent " + strings.Join(agent.CLIs(), "|") + "] [--test CMD] [--full-access]",
		Short: "Write a commented ralph.toml and PROMPT.md starter (with --agent: a working agent loop)",
		Long: `Write a commented ralph.toml and PROMPT.md into DIR (default .).

Without --agent the starter runs a static plan that needs no API key. With
--agent it is an agent loop: each iteration runs that agent CLI on PROMPT.md
plus ralph's feedback block, then the test command decides (--test, else
guessed from the project: go test, cargo test, pytest, npm test), bounded by
max_iterations, max_cost and no_progress; .ralph/ is added to .gitignore.
The agent gets the flags (or [agent.env]) its CLI needs to edit files in
DIR and run the test command unattended, and nothing more; --full-access
writes the CLI's bypass of every check instead, with a warning.`,
		Example: `  ralph init
  ralph init --agent claude
  ralph init myproject --agent codex --test "go test ./..."`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("init takes at most one DIR")
			}
			if test != "" && agentCLI == "" {
				return usageErrorf("--test applies to an agent loop; add --agent %s", agentChoices())
			}
			if fullAccess && agentCLI == "" {
				return usageErrorf("--full-access applies to an agent loop; add --agent %s", agentChoices())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			var files []string
			var err error
			if agentCLI == "" {
				files, err = config.WriteStarter(dir)
			} else {
				s := config.AgentStarter{CLI: agentCLI, FullAccess: fullAccess}
				if test != "" {
					if s.Test, err = config.SplitCommand(test); err != nil {
						return exitError(ExitUsage, fmt.Errorf("--test: %w", err))
					}
				}
				files, err = config.WriteAgentStarter(dir, s)
			}
			if err != nil {
				return exitError(ExitUsage, err)
			}
			return writeOut(cmd.OutOrStdout(), "wrote "+strings.Join(files, ", ")+"; try `ralph run`\n")
		},
	}
	cmd.Flags().StringVar(&agentCLI, "agent", "", "write an agent loop for `CLI` ("+strings.Join(agent.CLIs(), ", ")+")")
	cmd.Flags().StringVar(&test, "test", "", "the test `CMD` that decides when the agent is done (default: guessed from the project)")
	cmd.Flags().BoolVar(&fullAccess, "full-access", false, "let the agent run any command and edit any file, with no prompt and no sandbox (the CLI's bypass flag; for a throwaway container or VM)")
	return cmd
}

// agentChoices names the agent CLIs as init's errors offer them: "claude
// (or codex, gemini, opencode)".
func agentChoices() string {
	clis := agent.CLIs()
	return clis[0] + " (or " + strings.Join(clis[1:], ", ") + ")"
}
