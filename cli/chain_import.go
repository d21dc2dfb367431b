package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/ledger"
)

func newChainImportCmd(store *string) *cobra.Command {
	var keyFile string
	var trust []string
	cmd := &cobra.Command{
		Use:   "import [--key FILE] [--trust VKEY]... < chain.jsonl | chain.bundle",
		Short: "Append JSON-line actions (re-chained and re-signed), or load a bundle keeping every hash; all or nothing, even if killed",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := commandStoreDir(*store)
			if err != nil {
				return err
			}
			pinned, err := readVerifierKeyArgs(trust)
			if err != nil {
				return err
			}
			in := bufio.NewReaderSize(cmd.InOrStdin(), 1<<20)
			head, _ := in.Peek(len("ralph-bundle 1\n"))
			isBundle := strings.HasPrefix(string(head), "ralph-bundle ")
			opts := ledger.Options{Dir: dir, SyncWrites: true, KeyFile: signingKeyFile(keyFile)}
			var rep ledger.ImportReport
			if storeIsNew(dir) {
				// Streamed in chunks into a store that keeps Badger small: an
				// import of any size stays within a bounded RSS.
				opts.LowMemory = true
				debug.SetMemoryLimit(ledger.ImportMemoryLimit)
				rep, err = importIntoNewStore(cmd, opts, func(st *ledger.Store) (ledger.ImportReport, error) {
					if isBundle {
						r, _, err := st.ImportBundle(cmd.Context(), in, pinned)
						return r, err
					}
					return st.ImportStream(cmd.Context(), in)
				})
			} else {
				rep, err = importIntoStore(cmd, opts, isBundle, in)
			}
			if err != nil {
				return err
			}
			msg := "imported 0 actions\n"
			if rep.Actions > 0 {
				msg = fmt.Sprintf("imported %d actions as seq %d–%d\n", rep.Actions, rep.FirstSeq, rep.LastSeq)
			}
			return writeOut(cmd.OutOrStdout(), msg)
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "sign with the private key `FILE` (default RALPH_KEY, else $XDG_CONFIG_HOME/ralph/keys/<store id>.ed25519)")
	cmd.Flags().StringArrayVar(&trust, "trust", nil, "a bundle must be signed by the verifier key `VKEY` (or a file holding it); repeat it for a bundle that rotates keys")
	return cmd
}

// importIntoNewStore imports into a temporary store beside dir and renames
// it into place only once everything is committed and the store closed, so
// an error, Ctrl-C or kill -9 leaves no store (a killed import leaves only
// its temporary directory, .NAME.import-*, behind).
func importIntoNewStore(cmd *cobra.Command, opts ledger.Options, load func(*ledger.Store) (ledger.ImportReport, error)) (ledger.ImportReport, error) {
	dir := opts.Dir
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return ledger.ImportReport{}, exitError(ExitFailure, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(filepath.Clean(dir))+".import-")
	if err != nil {
		return ledger.ImportReport{}, exitError(ExitFailure, err)
	}
	defer os.RemoveAll(tmp) // nothing left after the rename
	opts.Dir = tmp
	st, err := openStore(opts, cmd.ErrOrStderr())
	if err != nil {
		return ledger.ImportReport{}, err
	}
	rep, err := load(st)
	cerr := st.Close()
	if err != nil {
		return ledger.ImportReport{}, exitError(ExitUsage, err)
	}
	if cerr != nil {
		return ledger.ImportReport{}, exitError(ExitFailure, cerr)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return ledger.ImportReport{}, exitError(ExitFailure, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return ledger.ImportReport{}, exitError(ExitFailure, err)
	}
	return rep, nil
}

// importIntoStore streams JSON lines into an existing store
// (ledger.Store.ImportStream): all or nothing even if killed, since the
// store rolls back an import that did not finish when it is next opened.
// An import that fails is rolled back here at once by reopening the store.
func importIntoStore(cmd *cobra.Command, opts ledger.Options, isBundle bool, in io.Reader) (ledger.ImportReport, error) {
	if isBundle {
		return ledger.ImportReport{}, usageErrorf("store %s already exists; a bundle is imported into a new store, where every action keeps its seq and hashes: pass --store NEWDIR", opts.Dir)
	}
	opts.LowMemory = true
	debug.SetMemoryLimit(ledger.ImportMemoryLimit)
	st, err := openStore(opts, cmd.ErrOrStderr())
	if err != nil {
		return ledger.ImportReport{}, err
	}
	rep, err := st.ImportStream(cmd.Context(), in)
	cerr := st.Close()
	if err == nil && cerr != nil {
		return rep, exitError(ExitFailure, cerr)
	}
	if err == nil {
		return rep, nil
	}
	// Reopening rolls back whatever the failed import committed.
	st, rerr := openStore(opts, io.Discard)
	if rerr == nil {
		rerr = st.Close()
	}
	if rerr != nil {
		return ledger.ImportReport{}, exitError(ExitFailure, fmt.Errorf("%w; rolling it back failed: %w (the next command that opens the store for writing rolls it back)", err, rerr))
	}
	return ledger.ImportReport{}, exitError(ExitUsage, fmt.Errorf("%w; nothing was imported", err))
}
