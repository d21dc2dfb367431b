package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/fleet"
)

// defaultNATS is where a fleet command looks for NATS when neither --nats
// nor RALPH_NATS names a server: what `ralph fleet serve` listens on.
const defaultNATS = "nats://127.0.0.1:4222"

// natsURL is the NATS server a submitter or worker uses: --nats, else
// RALPH_NATS, else the local `ralph fleet serve`. Reading commands do not
// call it: they read the fleet only when --nats is given, so an exported
// RALPH_NATS never changes what `ralph runs` shows of a local store.
func natsURL(flag string) string {
	switch {
	case flag != "":
		return flag
	case os.Getenv("RALPH_NATS") != "":
		return os.Getenv("RALPH_NATS")
	}
	return defaultNATS
}

// dialTimeout bounds connecting to NATS and each JetStream request a
// command makes while it sets up.
const dialTimeout = 5 * time.Second

// dialNATS connects to the NATS server(s) at url (comma-separated for a
// cluster). One that does not answer is a usage error with the fix. Once
// connected, a lost connection is re-established for as long as it takes
// (a worker's runs go on meanwhile; their jobs move to other workers only
// when the ack wait passes).
func dialNATS(url, name string) (*nats.Conn, error) {
	nc, err := nats.Connect(url, nats.Name(name), nats.Timeout(dialTimeout), nats.MaxReconnects(-1))
	if err != nil {
		if errors.Is(err, nats.ErrNoServers) || isConnRefused(err) {
			return nil, exitError(ExitUsage, fmt.Errorf("no NATS server answers at %s; start one with `ralph fleet serve` or pass --nats URL", url))
		}
		return nil, exitError(ExitUsage, fmt.Errorf("connect to NATS at %s: %w; check the URL, or start a server with `ralph fleet serve`", url, err))
	}
	return nc, nil
}

func isConnRefused(err error) bool {
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &op)
}

// openFleet connects to the fleet at url and returns its streams and
// buckets, made when missing. Existing ones keep how they were made (a
// cluster's three replicas are never cut to the one-machine default).
func openFleet(ctx context.Context, url, name string) (*nats.Conn, *fleet.Handles, error) {
	nc, err := dialNATS(url, name)
	if err != nil {
		return nil, nil, err
	}
	h, err := fleetHandles(ctx, nc, url)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, h, nil
}

func fleetHandles(ctx context.Context, nc *nats.Conn, url string) (*fleet.Handles, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, exitError(ExitFailure, err)
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c := fleet.DefaultConfig()
	s, err := js.Stream(ctx, fleet.StreamJobs)
	switch {
	case err == nil:
		cfg := s.CachedInfo().Config
		c.Replicas, c.Dedup = cfg.Replicas, cfg.Duplicates
		if kv, err := js.KeyValue(ctx, fleet.BucketWorkers); err == nil {
			if st, err := kv.Status(ctx); err == nil {
				c.WorkerTTL = st.TTL()
			}
		}
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return nil, exitError(ExitUsage, fmt.Errorf("the NATS server at %s has no JetStream; start it with JetStream enabled (nats-server -js), or use `ralph fleet serve`", url))
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, exitError(ExitFailure, fmt.Errorf("read the fleet's streams at %s: %w", url, err))
	case nc.ConnectedClusterName() != "":
		// The first to reach a cluster makes the fleet: three replicas of
		// everything, so losing one server (even a stream's leader) loses
		// nothing.
		c.Replicas = 3
	}
	h, err := fleet.Ensure(ctx, js, c)
	if err != nil {
		if c.Replicas == 3 && s == nil {
			return nil, exitError(ExitFailure, fmt.Errorf("make the fleet's streams with 3 replicas on NATS cluster %s: %w; a fleet on a cluster needs at least three JetStream servers", nc.ConnectedClusterName(), err))
		}
		return nil, exitError(ExitFailure, fmt.Errorf("the fleet at %s: %w", url, err))
	}
	return h, nil
}

func newFleetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Run loops on many machines: an embedded NATS JetStream server (fleet serve)",
		Long: `A fleet runs many loops on many machines over NATS JetStream: 'ralph submit'
queues runs, 'ralph worker' runs them, and reading commands take --nats URL
to show the fleet's copy. 'ralph fleet serve' is the NATS server for one
machine; any JetStream-enabled NATS cluster works the same way (docs/fleet.md).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newFleetServeCmd())
	return cmd
}

func newFleetServeCmd() *cobra.Command {
	var dir, listen string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "serve [--dir D] [--listen H:P]",
		Short: "Run an embedded NATS server with JetStream for a fleet on this machine",
		Long: `Run a NATS server with JetStream in this process, make the fleet's streams and
buckets, print the URL workers and submitters use, and serve until Ctrl-C or
SIGTERM. Streams and buckets are files in --dir (default
$XDG_STATE_HOME/ralph/fleet), so queued jobs, run states and replicated
chains survive a restart.

Exit status: 0 stopped by a signal, 2 bad flags or the address is in use,
1 the server failed.`,
		Example: `  ralph fleet serve
  ralph fleet serve --listen 0.0.0.0:4222 --dir /var/lib/ralph/fleet`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				d, err := defaultFleetDir()
				if err != nil {
					return exitError(ExitUsage, err)
				}
				dir = d
			}
			return fleetServe(cmd, dir, listen, verbose)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "`DIR` for the streams and buckets (default $XDG_STATE_HOME/ralph/fleet)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:4222", "client address `HOST:PORT` (port 0 picks a free one)")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "write the NATS server's own log to stderr")
	return cmd
}

// defaultFleetDir is $XDG_STATE_HOME/ralph/fleet (~/.local/state when
// XDG_STATE_HOME is unset).
func defaultFleetDir() (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no home directory to keep the fleet's streams in (%v); pass --dir DIR", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "ralph", "fleet"), nil
}

func fleetServe(cmd *cobra.Command, dir, listen string, verbose bool) error {
	if err := checkListen(listen); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return exitError(ExitUsage, fmt.Errorf("make the fleet directory %s: %w; pass --dir DIR", dir, err))
	}
	unlock, err := lockFleetDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	srv, err := fleet.StartServer(fleet.ServerOptions{Dir: dir, Listen: listen, Name: "ralph-fleet", Log: verbose})
	if err != nil {
		return exitError(ExitFailure, err)
	}
	defer srv.Shutdown()
	url := srv.ClientURL()
	nc, err := dialNATS(url, "ralph fleet serve")
	if err != nil {
		return err
	}
	_, err = fleetHandles(cmd.Context(), nc, url)
	nc.Close()
	if err != nil {
		return err
	}
	msg := fmt.Sprintf(`NATS with JetStream listening on %s (streams and buckets in %s)
next, in other terminals or on other machines:
  ralph worker --nats %s
  ralph submit ralph.toml --nats %s
Ctrl-C stops the server.
`, url, dir, url, url)
	if err := writeOut(cmd.OutOrStdout(), msg); err != nil {
		return err
	}
	<-cmd.Context().Done()
	return nil
}

// checkListen makes sure the client address can be listened on before the
// server starts (the server itself only reports a taken port by never
// becoming ready).
func checkListen(listen string) error {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return usageErrorf("--listen %q is not host:port; pass e.g. 127.0.0.1:4222", listen)
	}
	if port == "0" {
		return nil
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return exitError(ExitUsage, fmt.Errorf("port %s on %s is in use (another NATS server or `ralph fleet serve`?); stop it, or pass --listen %s:PORT with a free port", port, hostOrAll(host), hostOrAll(host)))
		}
		return exitError(ExitUsage, fmt.Errorf("cannot listen on %s: %v; pass --listen HOST:PORT", listen, err))
	}
	return l.Close()
}

func hostOrAll(h string) string {
	if h == "" {
		return "0.0.0.0"
	}
	return h
}
