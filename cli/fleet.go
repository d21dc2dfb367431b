package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
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

// signIns is where Run learns what NATS refused the command it ran: the
// command's fleet.SignIn, once the command has started.
type signIns struct{ s *fleet.SignIn }

type signInsKey struct{}

// refusal is what NATS refused the command, or nil.
func (h *signIns) refusal() error {
	if h.s == nil {
		return nil
	}
	return h.s.Refused()
}

type signInKey struct{}

// withSignIn returns ctx carrying s for the connections made under it.
func withSignIn(ctx context.Context, s *fleet.SignIn) context.Context {
	return context.WithValue(ctx, signInKey{}, s)
}

// signInFrom is the sign-in the command running under ctx was given (one
// that signs in with RALPH_NATS_CREDS when it was given none).
func signInFrom(ctx context.Context) *fleet.SignIn {
	if s, ok := ctx.Value(signInKey{}).(*fleet.SignIn); ok {
		return s
	}
	return &fleet.SignIn{}
}

// addNATSAuthFlags adds --creds and --tls-ca to a command that takes --nats,
// and puts what they say in the command's context before it runs: each
// command that takes --nats signs in (fleet.SignIn, §17) with a sign-in
// of its own, which reaches the code that connects through the context.
func addNATSAuthFlags(cmd *cobra.Command) {
	s := &fleet.SignIn{}
	fs := cmd.Flags()
	fs.StringVar(&s.Creds, "creds", "", "the fleet credentials `FILE` to sign in to NATS with (default RALPH_NATS_CREDS); `ralph fleet serve` writes them")
	fs.StringVar(&s.TLSCA, "tls-ca", "", "PEM `FILE` of the CA that signed the NATS server's TLS certificate")
	cmd.PreRunE = func(c *cobra.Command, _ []string) error {
		if h, ok := c.Context().Value(signInsKey{}).(*signIns); ok {
			h.s = s
		}
		c.SetContext(withSignIn(c.Context(), s))
		return nil
	}
}

// dialNATS is fleet.Dial as the command under ctx signs in.
func dialNATS(ctx context.Context, url, name string) (*nats.Conn, error) {
	nc, err := fleet.Dial(ctx, url, name, signInFrom(ctx))
	return nc, commandError(err)
}

// openFleet is fleet.Open as the command under ctx signs in.
func openFleet(ctx context.Context, url, name string) (*nats.Conn, *fleet.Handles, error) {
	nc, h, err := fleet.Open(ctx, url, name, signInFrom(ctx))
	return nc, h, commandError(err)
}

// fleetSigner is the signer of the command under ctx (fleet.SignIn.Signer).
func fleetSigner(ctx context.Context) (*fleet.Signer, error) {
	sg, err := signInFrom(ctx).Signer()
	return sg, commandError(err)
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
	cmd.AddCommand(newFleetServeCmd(), newFleetCredsCmd(), newFleetKeeperCmd())
	return cmd
}

func newFleetCredsCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "creds",
		Short: "Add or revoke a fleet member's NATS credentials (add NAME --role R | revoke NAME)",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", "", "the fleet `DIR` of `ralph fleet serve` (default $XDG_STATE_HOME/ralph/fleet)")
	var role string
	add := &cobra.Command{
		Use:   "add NAME --role worker|submitter|viewer|keeper",
		Short: "Write a credentials file for one more fleet member (another machine)",
		Long: `Make a new NATS user for the fleet with the role's permissions, write its
credentials file (0600) to DIR/creds/NAME.creds and print its path. A running
'ralph fleet serve' lets the new user in at once. Copy the file to the machine
that needs it and pass it with --creds (or RALPH_NATS_CREDS).`,
		Args: oneName("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := fleet.ParseRole(role)
			if err != nil {
				return exitError(ExitUsage, err)
			}
			d, err := fleetDir(dir)
			if err != nil {
				return err
			}
			if ms, err := fleet.LoadMembers(d); err != nil {
				return exitError(ExitUsage, err)
			} else if len(ms) == 0 {
				return usageErrorf("%s holds no fleet; start `ralph fleet serve --dir %s` once first, or pass the --dir of the fleet", d, d)
			}
			m, err := fleet.AddMember(d, args[0], r)
			if err != nil {
				return exitError(ExitUsage, err)
			}
			return writeOut(cmd.OutOrStdout(), fmt.Sprintf("%s (%s, key %s)\n", fleet.CredsPath(d, m.Name), m.Role, m.Key))
		},
	}
	add.Flags().StringVar(&role, "role", "", "the member's role: worker, submitter, viewer, or keeper (for ralph fleet keeper)")
	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Remove a fleet member: its credentials no longer sign in, and a running server closes its connections",
		Args:  oneName("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := fleetDir(dir)
			if err != nil {
				return err
			}
			if err := fleet.RevokeMember(d, args[0]); err != nil {
				return exitError(ExitUsage, err)
			}
			return writeOut(cmd.OutOrStdout(), fmt.Sprintf("revoked %s\n", args[0]))
		},
	}
	cmd.AddCommand(add, revoke)
	return cmd
}

func newFleetServeCmd() *cobra.Command {
	var dir, listen, tlsCert, tlsKey string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "serve [--dir D] [--listen H:P] [--tls-cert F --tls-key F]",
		Short: "Run an embedded NATS server with JetStream for a fleet on this machine",
		Long: `Run a NATS server with JetStream in this process, make the fleet's streams and
buckets, print the URL workers and submitters use, and serve until Ctrl-C or
SIGTERM. Streams and buckets are files in --dir (default
$XDG_STATE_HOME/ralph/fleet), so queued jobs, run states and replicated
chains survive a restart.

Only the fleet's members reach the server: on first start it makes one NATS
user per role (worker, submitter, viewer) and writes their credentials files
to DIR/creds; 'ralph fleet creds add' and 'revoke' change them while it runs.
Listening on anything but loopback needs TLS (--tls-cert, --tls-key).

Exit status: 0 stopped by a signal, 2 bad flags or the address is in use,
1 the server failed.`,
		Example: `  ralph fleet serve
  ralph fleet serve --listen 0.0.0.0:4222 --tls-cert server.pem --tls-key server-key.pem --dir /var/lib/ralph/fleet`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := fleetDir(dir)
			if err != nil {
				return err
			}
			o := fleet.HostOptions{Dir: d, Listen: listen, Log: verbose, TLSCert: tlsCert, TLSKey: tlsKey, ErrOut: cmd.ErrOrStderr()}
			o.Ready = func(url string, made bool, members []fleet.Member) error {
				return writeOut(cmd.OutOrStdout(), serveMessage(o, url, made, members))
			}
			return commandError(fleet.Host(cmd.Context(), o))
		},
	}
	cmd.Flags().StringVar(&tlsCert, "tls-cert", "", "the server's TLS certificate, a PEM `FILE` (needed to listen beyond loopback)")
	cmd.Flags().StringVar(&tlsKey, "tls-key", "", "the TLS certificate's private key, a PEM `FILE`")
	cmd.Flags().StringVar(&dir, "dir", "", "`DIR` for the streams and buckets (default $XDG_STATE_HOME/ralph/fleet)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:4222", "client address `HOST:PORT` (port 0 picks a free one)")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "write the NATS server's own log to stderr")
	return cmd
}

// fleetDir is the fleet directory --dir names, else fleet.DefaultDir.
func fleetDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	d, err := fleet.DefaultDir()
	return d, commandError(err)
}

// serveMessage is what ralph fleet serve says once its server listens at
// url: where the credentials are (made: new ones) and the commands that
// reach the fleet.
func serveMessage(o fleet.HostOptions, url string, made bool, members []fleet.Member) string {
	dir := o.Dir
	creds := filepath.Join(dir, "creds")
	tlsNote := ""
	if o.TLSCert != "" {
		tlsNote = " --tls-ca CA.pem"
	}
	status := "the fleet's members"
	if made {
		status = "new credentials"
	}
	return fmt.Sprintf(`NATS with JetStream listening on %s (streams and buckets in %s)
%s in %s (0600; copy one to the machine that needs it):
  %s
next, in other terminals or on other machines:
  ralph worker --nats %s --creds %s%s
  ralph submit ralph.toml --nats %s --creds %s%s
  ralph runs --nats %s --creds %s%s
more: ralph fleet creds add NAME --role worker|submitter|viewer --dir %s
Ctrl-C stops the server.
`, url, dir, status, creds, strings.Join(memberFiles(dir, members), "\n  "),
		url, fleet.CredsPath(dir, "worker"), tlsNote, url, fleet.CredsPath(dir, "submitter"), tlsNote,
		url, fleet.CredsPath(dir, "viewer"), tlsNote, dir)
}

func memberFiles(dir string, ms []fleet.Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%-10s %s", m.Role, fleet.CredsPath(dir, m.Name)))
	}
	return out
}

// oneName takes exactly one positional argument, what names.
func oneName(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageErrorf("%s takes one %s, got %d arguments; e.g. `ralph fleet creds %s laptop`", cmd.Name(), what, len(args), cmd.Name())
		}
		return nil
	}
}

// newFleetKeeperCmd is `ralph fleet keeper`: the fleet's keeper (signed
// submits, the roster, certified worker keys) for a fleet on a NATS server
// of your own, where no `ralph fleet serve` runs one.
func newFleetKeeperCmd() *cobra.Command {
	var natsFlag, dir string
	cmd := &cobra.Command{
		Use:   "keeper --nats URL --creds FILE [--dir DIR]",
		Short: "Run the fleet's keeper against a NATS server of your own (ralph fleet serve runs one itself)",
		Long: `The keeper checks the signature of every submit and queues the job, answers
the roster workers check signed controls against, and certifies workers'
chain keys with the fleet key. ralph fleet serve runs it beside its server; on
a nats-server of your own (docs/fleet.md gives the roles as its
configuration), run it here, signed in with the credentials of a member with
the keeper role (ralph fleet creds add NAME --role keeper), and with the
fleet directory that holds the members and the fleet key (--dir).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := fleetDir(dir)
			if err != nil {
				return err
			}
			if _, err := fleet.ReadRoster(d); err != nil {
				return exitError(ExitUsage, fmt.Errorf("%w; pass the --dir of the fleet (its users.json and fleet.nk)", err))
			}
			url := natsURL(natsFlag)
			ctx := cmd.Context()
			signInFrom(ctx).Makes = true // stream configuration is the keeper's alone (§17)
			nc, _, err := openFleet(ctx, url, "ralph fleet keeper")
			if err != nil {
				return err
			}
			defer nc.Close()
			k, err := fleet.StartKeeper(nc, d)
			if err != nil {
				return exitError(ExitFailure, err)
			}
			defer k.Stop()
			if err := writeOut(cmd.OutOrStdout(), fmt.Sprintf("the fleet's keeper answers on %s for the fleet in %s; Ctrl-C stops it\n", url, d)); err != nil {
				return err
			}
			// NATS refuses a subscription the role does not allow after the
			// fact (credentials that are not a keeper's): that ends it.
			auth := signInFrom(ctx)
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
					if e := auth.Refused(); e != nil {
						return commandError(e)
					}
				}
			}
		},
	}
	cmd.Flags().StringVar(&natsFlag, "nats", "", natsFlagUsage)
	cmd.Flags().StringVar(&dir, "dir", "", "the fleet `DIR` with its members and fleet key (default $XDG_STATE_HOME/ralph/fleet)")
	addNATSAuthFlags(cmd)
	return cmd
}
