package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/web"
)

// newWebCmd is `ralph web`: the pages of package web over the store
// --store names (or the fleet --nats names).
func newWebCmd() *cobra.Command {
	var store, natsURL, tokenFile string
	lo := web.ListenOptions{}
	cmd := &cobra.Command{
		Use:   "web [--store DIR | --nats URL] [--listen ADDR] [--token-file F] [--tls-cert F --tls-key F]",
		Short: "Serve the runs, a run's chain, conditions, output, diffs and what-if in a browser; the first line printed is its URL",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if natsURL != "" && store != "" {
				return usageErrorf("--store and --nats name two places to read; pass one")
			}
			token := web.NewToken()
			if tokenFile != "" {
				t, err := web.ReadToken(tokenFile)
				if err != nil {
					return exitError(ExitUsage, err)
				}
				token = t
			}
			ln, url, err := web.Listen(lo)
			if err != nil {
				return commandError(err)
			}
			where := "the fleet at " + config.RedactURL(natsURL)
			if natsURL == "" {
				dir, err := commandStoreDir(store)
				if err != nil {
					return err
				}
				where = "the store " + dir
			}
			src := mcpSource(cmd.Context(), store, natsURL, "ralph web", "the runs page lists the ids", cmd.ErrOrStderr())
			srv, err := web.New(web.Options{Source: src, Token: token, Addr: ln.Addr().String(), Where: where, Version: version})
			if err != nil {
				ln.Close()
				return exitError(ExitUsage, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s?token=%s\n", url, token)
			return commandError(srv.Serve(cmd.Context(), ln))
		},
	}
	cmd.Flags().StringVar(&store, "store", "", "the store `DIR` to serve (default: RALPH_STORE, else ./.ralph)")
	cmd.Flags().StringVar(&natsURL, "nats", "", "serve the runs of the fleet at NATS `URL` instead of a store")
	addNATSAuthFlags(cmd)
	cmd.Flags().StringVar(&lo.Addr, "listen", "127.0.0.1:0", "listen on `HOST:PORT` (port 0: a free one); beyond loopback it needs --tls-cert and --tls-key")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "read the token from `FILE` instead of making a random one")
	cmd.Flags().StringVar(&lo.TLSCert, "tls-cert", "", "the server's TLS certificate, a PEM `FILE` (needed to listen beyond loopback)")
	cmd.Flags().StringVar(&lo.TLSKey, "tls-key", "", "the TLS certificate's private key, a PEM `FILE`")
	return cmd
}
