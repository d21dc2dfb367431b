package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/mcpserver"
	"github.com/ralphloop/ralph/serve"
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
			var src mcpserver.Source = storeSource{store: store, errOut: cmd.ErrOrStderr()}
			if natsURL != "" {
				src = fleetSource{url: natsURL, signIn: signInFrom(cmd.Context()), errOut: cmd.ErrOrStderr()}
			}
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

// storeSource is a store for the MCP server: opened read-only for each
// call, or reached through its socket while a ralph holds it.
type storeSource struct {
	store  string
	errOut io.Writer
}

func (s storeSource) Store(ctx context.Context) (mcpserver.Reader, error) {
	return openReader(ctx, s.store, ledger.Options{}, s.errOut)
}

func (s storeSource) Run(ctx context.Context, id string) (*mcpserver.Run, error) {
	st, err := openReader(ctx, s.store, ledger.Options{}, s.errOut)
	if err != nil {
		return nil, err
	}
	r, err := runOf(st, id)
	if err != nil {
		return nil, err
	}
	if info := st.Served(); info != nil && info.RunID == r.ID {
		r.Live, r.State = true, info.State
	}
	return r, nil
}

func (s storeSource) Runs(ctx context.Context) ([]loop.RunRecord, error) {
	st, err := openReader(ctx, s.store, ledger.Options{}, s.errOut)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return st.ListRuns()
}

func (s storeSource) Control(ctx context.Context, r *mcpserver.Run, do string) error {
	st := r.Reader.(serve.Reader)
	if info := st.Served(); info == nil || info.RunID != r.ID {
		return fmt.Errorf("run %s is not running (its state is %s); only the loop a ralph process runs now can be steered", r.ID, r.Record.State)
	}
	c, err := serve.Dial(ctx, st.Dir())
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Control(ctx, do, 0)
}

// Diff reads the run's checkpoints of iterations it-1 and it.
func (s storeSource) Diff(ctx context.Context, r *mcpserver.Run, acts []ledger.Action, it int) ([]gitx.FileStat, string, string) {
	files, diff, err := loop.IterationDiff(ctx, r.ID, acts, it)
	if err != nil {
		return nil, "", err.Error()
	}
	return files, diff, ""
}

// runOf finds the run id names in st (a unique prefix will do); st is
// closed when it does not hold it.
func runOf(st serve.Reader, id string) (*mcpserver.Run, error) {
	full, err := resolveRun(st, id)
	if err != nil {
		st.Close()
		if strings.HasPrefix(err.Error(), "no run ") {
			return nil, fmt.Errorf("no run %s in store %s; list_runs gives the ids", id, st.Dir())
		}
		return nil, err
	}
	return &mcpserver.Run{Reader: st, ID: full, Record: runRecord(st, full)}, nil
}

// runRecord is id's record, or one with the id alone (a chain imported
// without its run records).
func runRecord(st serve.Reader, id string) loop.RunRecord {
	runs, _ := st.ListRuns() // best effort: the chain itself is read next
	for _, r := range runs {
		if r.ID == id {
			return r
		}
	}
	return loop.RunRecord{ID: id}
}

// fleetSource is a fleet for the MCP server: each run's chain is rebuilt
// from its stream per call.
type fleetSource struct {
	url    string
	signIn *fleet.SignIn // --creds and --tls-ca, for the fleet's connections
	errOut io.Writer
}

func (f fleetSource) Store(context.Context) (mcpserver.Reader, error) {
	return nil, errors.New("with --nats, name the run with run_id: a fleet's chains are kept one per run")
}

func (f fleetSource) Run(ctx context.Context, id string) (*mcpserver.Run, error) {
	st, err := openRunReader(withSignIn(ctx, f.signIn), "", f.url, id, ledger.Options{}, f.errOut)
	if err != nil {
		return nil, err
	}
	r, err := runOf(st, id)
	if err != nil {
		return nil, err
	}
	fr := st.(fleet.RunReader)
	r.Record, r.Live, r.Handle = fr.Run.Record(), fr.Run.State == fleet.StateRunning, fr
	return r, nil
}

func (f fleetSource) Runs(ctx context.Context) ([]loop.RunRecord, error) {
	c, err := openFleetReader(withSignIn(ctx, f.signIn), f.url, "ralph mcp")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	states, err := c.States(ctx)
	if err != nil {
		return nil, commandError(err)
	}
	out := []loop.RunRecord{}
	for _, s := range states {
		out = append(out, s.Record())
	}
	return out, nil
}

func (f fleetSource) Control(ctx context.Context, r *mcpserver.Run, do string) error {
	fr := r.Handle.(fleet.RunReader)
	if fr.Run.State != fleet.StateRunning {
		return fmt.Errorf("run %s is not running (its state in the fleet is %s); only a run a worker runs now can be steered", r.ID, fr.Run.State)
	}
	signer, err := f.signIn.Signer()
	if err != nil {
		return commandError(err)
	}
	return fleet.Control(ctx, fr.Fleet.NC, signer, r.ID, do)
}

func (f fleetSource) Diff(_ context.Context, r *mcpserver.Run, _ []ledger.Action, _ int) ([]gitx.FileStat, string, string) {
	return nil, "", "a fleet run's checkpoints are commits on its branch ralph/" + r.ID + " in the workspace's repository, not here"
}
