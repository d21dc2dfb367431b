package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/mcpserver"
	"github.com/ralphloop/ralph/runsource"
	"github.com/ralphloop/ralph/web"
)

// newMCPCmd is `ralph mcp`: the MCP server (package mcpserver) over stdio,
// reading the store --store names (or the fleet --nats names).
func newMCPCmd() *cobra.Command {
	var store, natsURL string
	var allowControl bool
	cmd := &cobra.Command{
		Use:   "mcp [--store DIR | --nats URL] [--allow-control]",
		Short: "Serve the store's runs to MCP clients (Claude Code, Codex, Gemini CLI) over stdio; read-only unless --allow-control",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A store that does not exist yet is no error: the server is
			// often registered before the first run, and each call says so.
			if natsURL != "" && store != "" {
				return usageErrorf("--store and --nats name two places to read; pass one")
			}
			src := mcpSource(cmd.Context(), store, natsURL, "ralph mcp", "list_runs gives the ids", cmd.ErrOrStderr())
			srv := mcpserver.New(mcpserver.Options{Source: src, AllowControl: allowControl, Version: version})
			t := &mcp.IOTransport{Reader: io.NopCloser(cmd.InOrStdin()), Writer: nopWriteCloser{cmd.OutOrStdout()}}
			if err := srv.Run(cmd.Context(), t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
				return exitError(ExitFailure, fmt.Errorf("mcp: %w", err))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&store, "store", "", "the store `DIR` to serve (default: RALPH_STORE, else ./.ralph)")
	cmd.Flags().StringVar(&natsURL, "nats", "", "serve the runs of the fleet at NATS `URL` instead of a store")
	addNATSAuthFlags(cmd)
	cmd.Flags().BoolVar(&allowControl, "allow-control", false, "let clients pause, resume, skip an iteration of and abort the running loop")
	return cmd
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// mcpSource is where ralph mcp and ralph web read: the fleet at natsURL
// when it is set, else the store storeFlag names.
func mcpSource(ctx context.Context, storeFlag, natsURL, name, runsHint string, errOut io.Writer) web.Source {
	if natsURL != "" {
		return runsource.Fleet{URL: natsURL, SignIn: signInFrom(ctx), Name: name, ErrOut: errOut}
	}
	return runsource.Store{Dir: func() (string, error) { return existingStoreDir(storeFlag) }, ErrOut: errOut,
		OnCloseStuck: noteStuck, RunsHint: runsHint}
}
