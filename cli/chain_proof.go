package cli

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/ledger"
)

// signingKeyFile is the private key a writing command signs with: --key,
// else RALPH_KEY, else "" (the store's own file under
// $XDG_CONFIG_HOME/ralph/keys/).
func signingKeyFile(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv("RALPH_KEY")
}

func newChainKeyCmd(store *string) *cobra.Command {
	var move bool
	var keyFile string
	cmd := &cobra.Command{
		Use:   "key [--move [--key FILE]]",
		Short: "Print the store's signed-note verifier key; --move moves an old store's private key out of the store",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if move {
				return moveLegacyKey(cmd, *store, signingKeyFile(keyFile))
			}
			st, err := openReader(cmd.Context(), *store, ledger.Options{}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			if st.VerifierKeyString() == "" {
				return exitError(ExitFailure, fmt.Errorf("store %s was made by an earlier ralph and records no verifier key yet; run ralph chain key --move (or any write) to record one", st.Dir()))
			}
			return writeOut(cmd.OutOrStdout(), st.VerifierKeyString()+"\n")
		},
	}
	cmd.Flags().BoolVar(&move, "move", false, "move the private key a store made by an earlier ralph keeps in <store>/keys/ to $XDG_CONFIG_HOME/ralph/keys/")
	cmd.Flags().StringVar(&keyFile, "key", "", "with --move: move the key to `FILE` instead (then pass it with --key or RALPH_KEY when writing)")
	return cmd
}

// moveLegacyKey records the store's id and verifier key with the key it
// keeps inside itself, then moves that key out.
func moveLegacyKey(cmd *cobra.Command, flag, dest string) error {
	dir, err := existingStoreDir(flag)
	if err != nil {
		return err
	}
	if _, err := os.Stat(ledger.LegacyKeyPath(dir)); errors.Is(err, os.ErrNotExist) {
		return usageErrorf("store %s keeps no private key inside it: nothing to move", dir)
	}
	st, err := openStore(ledger.Options{Dir: dir, KeyFile: ledger.LegacyKeyPath(dir)}, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	id, vkey := st.ID(), st.VerifierKeyString()
	if err := st.Close(); err != nil {
		return exitError(ExitFailure, err)
	}
	if dest == "" {
		kd, err := ledger.DefaultKeyDir()
		if err != nil {
			return exitError(ExitFailure, err)
		}
		dest = ledger.StoreKeyPath(kd, id)
	}
	if err := ledger.MoveLegacyKey(dir, dest); err != nil {
		return exitError(ExitFailure, err)
	}
	return writeOut(cmd.OutOrStdout(), fmt.Sprintf("moved the private key of %s to %s\nverifier key %s\n", dir, dest, vkey))
}

func newChainCheckpointCmd(store *string) *cobra.Command {
	return &cobra.Command{
		Use:   "checkpoint > checkpoint.txt",
		Short: "Print the latest signed checkpoint (a C2SP signed note) to keep outside the store",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := openReader(cmd.Context(), *store, ledger.Options{}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			cp, err := st.LatestCheckpoint()
			if err != nil {
				return exitError(ExitFailure, err)
			}
			return writeOut(cmd.OutOrStdout(), string(cp.Note))
		},
	}
}

func newChainProveCmd(store *string) *cobra.Command {
	return &cobra.Command{
		Use:   "prove SEQ",
		Short: "Print an RFC 6962 inclusion proof of action SEQ in the latest checkpoint, and how to check it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil || seq == 0 {
				return usageErrorf("SEQ must be a positive integer, not %q", args[0])
			}
			st, err := openReader(cmd.Context(), *store, ledger.Options{}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			p, err := st.ProveInclusion(cmd.Context(), seq)
			if errors.Is(err, ledger.ErrNotFound) {
				return usageErrorf("%v", err)
			}
			if err != nil {
				return exitError(ExitFailure, err)
			}
			if err := p.Verify(); err != nil {
				return exitError(ExitFailure, fmt.Errorf("the inclusion proof of action %d does not verify against checkpoint %d: %w; run ralph chain verify", seq, p.Checkpoint.Seq, err))
			}
			return writeOut(cmd.OutOrStdout(), p.Text())
		},
	}
}
