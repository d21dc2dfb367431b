package cli

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/serve"
)

func newChainCmd() *cobra.Command {
	var store string
	cmd := &cobra.Command{
		Use:   "chain",
		Short: "Verify, show, export and import the causal chain",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().StringVar(&store, "store", "", "store `DIR` (overrides RALPH_STORE and store.dir)")
	cmd.AddCommand(newChainVerifyCmd(&store), newChainShowCmd(&store), newChainExportCmd(&store), newChainImportCmd(&store),
		newChainKeyCmd(&store), newChainCheckpointCmd(&store), newChainProveCmd(&store))
	return cmd
}

func newChainVerifyCmd(store *string) *cobra.Command {
	var since, bundle, natsURL, runID string
	var keys []string
	cmd := &cobra.Command{
		Use:   "verify [--key VKEY]... [--since CHECKPOINT_FILE] [--bundle FILE] [--nats URL --run ID]",
		Short: "Recompute every hash, link, signature, Merkle root and index; prove consistency with the witnessed checkpoint; exit 1 naming the first bad seq",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pinned, err := readVerifierKeyArgs(keys)
			if err != nil {
				return err
			}
			if bundle != "" {
				return verifyBundleFile(cmd, bundle, pinned)
			}
			switch {
			case natsURL != "" && since != "":
				return usageErrorf("--since proves a store consistent with a saved checkpoint; with --nats, pin the keys with --key instead")
			case natsURL != "":
				return verifyFleetChain(cmd, natsURL, runID, pinned)
			case runID != "":
				return usageErrorf("--run names a run of the fleet (with --nats); a store is verified whole")
			}
			if len(pinned) > 1 {
				return usageErrorf("--key is given %d times, but a store is signed by one key; pin more than one only with --bundle", len(pinned))
			}
			vkey := ""
			if len(pinned) == 1 {
				vkey = pinned[0]
			}
			return verifyStoreChain(cmd, *store, vkey, since)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&keys, "key", nil, "trust only the verifier key `VKEY` (as ralph chain key prints it, or a file holding it); repeat it for a bundle that rotates keys")
	fl.StringVar(&since, "since", "", "prove the store consistent with the checkpoint saved in `FILE` (ralph chain checkpoint > FILE)")
	fl.StringVar(&bundle, "bundle", "", "verify the bundle `FILE` (ralph chain export --bundle) with no store")
	fl.StringVar(&natsURL, "nats", "", "verify a run's chain as the fleet at NATS `URL` replicated it (with --run)")
	addNATSAuthFlags(cmd)
	fl.StringVar(&runID, "run", "", "with --nats: the run `ID` (a unique prefix will do, or latest) whose chain to verify")
	return cmd
}

// verifyStoreChain verifies the store in dir, with the verifier key vkey
// ("" the store's own), against the witnessed checkpoint and the one saved
// in since ("" none), and prints what it proved or every problem.
func verifyStoreChain(cmd *cobra.Command, dir, vkey, since string) error {
	st, err := openReader(cmd.Context(), dir, ledger.Options{}, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer st.Close()
	opts, err := storeVerifyOptions(st.ID(), vkey, since)
	if err != nil {
		return err
	}
	// A held store is verified by its process, from one snapshot:
	// up to the head as it was when verification began.
	rep, err := st.VerifyWith(cmd.Context(), opts)
	var ie *ledger.IntegrityError
	switch {
	case errors.As(err, &ie):
		for _, p := range rep.Problems[1:] {
			fmt.Fprintf(cmd.ErrOrStderr(), "also: seq %d: %s\n", p.Seq, p.Reason)
		}
		fmt.Fprintln(cmd.ErrOrStderr(), rep.TrustLine())
		return exitError(ExitFailure, err)
	case err != nil:
		return exitError(ExitFailure, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "verified %d actions, %d checkpoints\n", rep.Actions, rep.Checkpoints)
	b.WriteString(rep.TrustLine() + "\n")
	for _, c := range rep.Consistent {
		fmt.Fprintf(&b, "consistent with checkpoint %s\n", c.Name)
	}
	return writeOut(cmd.OutOrStdout(), b.String())
}

// storeVerifyOptions are the key and the saved checkpoints to verify the
// store storeID with: the witnessed one, then the one in since.
func storeVerifyOptions(storeID, vkey, since string) (ledger.VerifyOptions, error) {
	opts := ledger.VerifyOptions{Key: vkey}
	if wd, err := ledger.DefaultWitnessDir(); err == nil {
		w, err := ledger.ReadWitness(wd, storeID)
		if err != nil {
			return opts, exitError(ExitFailure, fmt.Errorf("read the witnessed checkpoint: %w", err))
		}
		if w != nil {
			opts.Since = append(opts.Since, ledger.SavedCheckpoint{Name: ledger.WitnessPath(wd, storeID), Note: w})
		}
	}
	if since != "" {
		b, err := ledger.ReadCheckpointFile(since)
		if err != nil {
			return opts, usageErrorf("read --since checkpoint: %v", err)
		}
		opts.Since = append(opts.Since, ledger.SavedCheckpoint{Name: since, Note: b})
	}
	return opts, nil
}

// readVerifierKeyArgs takes every --key (or --trust) given.
func readVerifierKeyArgs(args []string) ([]string, error) {
	var keys []string
	for _, a := range args {
		k, err := readVerifierKeyArg(a)
		if err != nil {
			return nil, err
		}
		if k != "" {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// readVerifierKeyArg takes --key: a verifier key, or a file holding one.
func readVerifierKeyArg(arg string) (string, error) {
	if arg == "" {
		return "", nil
	}
	if b, err := os.ReadFile(arg); err == nil {
		arg = strings.TrimSpace(string(b))
	}
	if _, _, err := ledger.ParseVerifierKey(arg); err != nil {
		return "", usageErrorf("--key: %v", err)
	}
	return arg, nil
}

func newChainShowCmd(store *string) *cobra.Command {
	var f ledger.Filter
	var asJSON, tree bool
	var natsURL string
	cmd := &cobra.Command{
		Use:   "show [--run ID | --plan ID | --intent ID] [--json] [--tree] [--nats URL --run ID]",
		Short: "Print actions: one line each, as JSON lines, or as a tree",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON && tree {
				return usageErrorf("choose one of --json and --tree")
			}
			st, err := openRunReader(cmd.Context(), *store, natsURL, f.RunID, ledger.Options{}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			if f.RunID != "" { // a prefix, maybe, or latest
				if f.RunID, err = resolveRunRef(st, givenRun(f.RunID), nil); err != nil {
					return err
				}
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			var acts []ledger.Action
			var buf []byte
			shown := 0
			err = st.Select(f, func(a ledger.Action) error {
				shown++
				switch {
				case tree:
					acts = append(acts, a)
				case asJSON:
					buf = append(ledger.AppendJSON(buf[:0], &a), '\n')
					_, err := w.Write(buf)
					return err
				default:
					_, err := fmt.Fprintln(w, ledger.Summary(&a))
					return err
				}
				return nil
			})
			if err != nil {
				return exitError(ExitFailure, err)
			}
			if shown == 0 && (f.RunID != "" || f.PlanID != "" || f.IntentID != "") {
				return usageErrorf("no action in %s belongs to %s; `ralph runs` lists the runs", st.Dir(), f.Name())
			}
			if tree {
				if err := ledger.WriteTree(w, ledger.BuildTree(ledger.UnderIterations(acts))); err != nil {
					return exitError(ExitFailure, err)
				}
			}
			return w.Flush()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.RunID, "run", "", "only actions of run `ID` (a unique prefix will do, or latest)")
	fl.StringVar(&f.PlanID, "plan", "", "only actions of plan `ID`")
	fl.StringVar(&f.IntentID, "intent", "", "only actions of intent `ID`")
	fl.BoolVar(&asJSON, "json", false, "one JSON object per line (the ledger's JSON form, docs/ledger.md)")
	fl.BoolVar(&tree, "tree", false, "arrange actions by parent")
	addNATSAuthFlags(cmd)
	fl.StringVar(&natsURL, "nats", "", "show a run's chain as the fleet at NATS `URL` replicated it (with --run)")
	return cmd
}

func newChainExportCmd(store *string) *cobra.Command {
	var f ledger.Filter
	var bundle bool
	var natsURL string
	cmd := &cobra.Command{
		Use:   "export [--run ID] > chain.jsonl | export --bundle > chain.bundle | export --nats URL --run ID [--bundle]",
		Short: "Write actions as JSON lines, or the whole store as a lossless, self-verifying bundle",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if bundle && natsURL != "" {
				return exportFleetBundle(cmd, natsURL, f.RunID)
			}
			if bundle && f.RunID != "" {
				return usageErrorf("a bundle holds the whole store; drop --run or --bundle")
			}
			st, err := openRunReader(cmd.Context(), *store, natsURL, f.RunID, ledger.Options{}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			if f.RunID != "" { // a prefix, maybe, or latest
				if f.RunID, err = resolveRunRef(st, givenRun(f.RunID), nil); err != nil {
					return err
				}
			}
			if bundle {
				return commandError(serve.ExportBundle(st, cmd.OutOrStdout()))
			}
			if err := serve.Export(st, cmd.OutOrStdout(), f); err != nil {
				return exitError(ExitFailure, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&f.RunID, "run", "", "only actions of run `ID` (a unique prefix will do, or latest)")
	addNATSAuthFlags(cmd)
	cmd.Flags().BoolVar(&bundle, "bundle", false, "write every action's canonical bytes, every checkpoint and the verifier key (docs/ledger.md)")
	cmd.Flags().StringVar(&natsURL, "nats", "", "export a run's chain as the fleet at NATS `URL` replicated it (with --run; --bundle: the run's bundle)")
	return cmd
}

// verifyBundleFile checks a bundle with no store.
func verifyBundleFile(cmd *cobra.Command, path string, pinned []string) error {
	f, err := os.Open(path)
	if err != nil {
		return usageErrorf("open bundle: %v", err)
	}
	defer f.Close()
	rep, err := ledger.ReadBundle(cmd.Context(), bufio.NewReaderSize(f, 1<<20), pinned, nil)
	if err != nil {
		return exitError(ExitFailure, fmt.Errorf("bundle %s does not verify: %w", path, err))
	}
	return writeOut(cmd.OutOrStdout(), rep.Text(path))
}
