package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/agent"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/serve"
	"github.com/ralphloop/ralph/stop"
)

type runFlags struct {
	noTUI, asJSON, approve, verbose bool
	brief                           bool // headless: only each iteration's brief line
	maxIterations                   int
	provider, model, store          string
	sandbox                         string // --sandbox MODE: overrides [sandbox] mode
	// detach starts the run in the background (run --detach); runID and
	// logToStore are how that background process is told its run id and
	// to write its output to the run's log file (hidden flags).
	detach, logToStore bool
	runID              string
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [CONFIG]",
		Short: "Run a Ralph loop until a stop condition fires",
		Long: `Run the loop described by CONFIG (default ./ralph.toml): each iteration asks the
provider for a plan, admits it through governance, executes it, records every
event on the causal chain, then evaluates the stop conditions.

When stdout is a terminal the live UI shows the run (p pause, s skip, a abort,
v history, ? help, q quit). Otherwise, or with --no-tui, the run is headless:
one line per event (and after each evaluation, the iteration in one line:
it 3/20 done 1m12s +$0.14 ($0.42, 4% of budget) · tests: FAIL TestAdd …),
then a summary, which for a run that ends without success says what still
fails; --brief prints only those iteration lines and the summary;
--json prints one JSON object per line.

Exit status: 0 a success-class stop, 1 a failure-class stop, 2 a bad config,
plan or provider setup, 3 a limit-class stop, 4 aborted by the user (first
Ctrl-C or q; compensations run). A second Ctrl-C ends the process at once (130).`,
		Example: `  ralph run
  ralph run examples/quickstart/ralph.toml --max-iterations 5
  ralph run --json | jq .action_type`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("run takes at most one CONFIG, got %d arguments", len(args))
			}
			if f.maxIterations < 0 {
				return usageErrorf("--max-iterations must be positive, got %d", f.maxIterations)
			}
			return checkSandboxFlag(f.sandbox)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := configArg(args)
			if err != nil {
				return err
			}
			if f.detach {
				return startDetached(cmd, cfg, args, f)
			}
			limitRunMemory()
			return runLoop(cmd, cfg, f, "")
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.detach, "detach", false, "start in the background (its own session), print the run id and how to attach; output goes to <store>/logs/RUN_ID.log")
	fl.StringVar(&f.runID, "run-id", "", "the new run's `ID` (a UUID)")
	fl.BoolVar(&f.logToStore, "log-to-store", false, "write output to <store>/logs/RUN_ID.log once the store is open")
	_ = fl.MarkHidden("run-id")
	_ = fl.MarkHidden("log-to-store")
	fl.BoolVar(&f.noTUI, "no-tui", false, "run headless even when stdout is a terminal")
	fl.BoolVar(&f.asJSON, "json", false, "one JSON object per line on stdout")
	fl.BoolVar(&f.approve, "approve", false, "show each plan and ask y/n before running it (keys in the UI, stdin headless)")
	fl.BoolVar(&f.verbose, "verbose", false, "print every stop condition's result after each iteration")
	fl.BoolVar(&f.brief, "brief", false, "headless: print only one line per iteration (it 3/20 done 1m12s +$0.14 … · tests: FAIL TestAdd …) and the summary")
	fl.IntVar(&f.maxIterations, "max-iterations", 0, "stop (limit class) after `N` iterations")
	fl.StringVar(&f.provider, "provider", "", "override [model].provider")
	fl.StringVar(&f.model, "model", "", "override [model].model")
	fl.StringVar(&f.store, "store", "", "store `DIR` (overrides RALPH_STORE and store.dir)")
	addSandboxFlag(fl, &f.sandbox)
	return cmd
}

// runLoop wires the runner for cfg and drives it, in the UI when stdout is
// a terminal, headless otherwise. resumeID, when set, continues that run.
func runLoop(cmd *cobra.Command, cfg *config.Config, f runFlags, resumeID string) (err error) {
	if f.brief && f.asJSON {
		return usageErrorf("--brief and --json both choose what is printed; use one of them")
	}
	interactive := !f.noTUI && !f.asJSON && !f.brief && isTTY(cmd.OutOrStdout())
	if f.approve && !interactive && !isTTY(cmd.InOrStdin()) {
		return usageErrorf("--approve asks y/n on standard input, which is not a terminal; run without --approve or from a terminal")
	}
	runID := resumeID
	if resumeID == "" {
		runID = f.runID // set by run --detach
	}
	if runID == "" {
		runID = loop.NewID()
	}
	rs, err := setupRun(cmd.Context(), cfg, runSetupOptions{Store: f.store, Provider: f.provider, Model: f.model,
		MaxIterations: f.maxIterations, RunID: runID, Resume: resumeID != "", Sandbox: f.sandbox, ErrOut: cmd.ErrOrStderr()})
	if err != nil {
		return err
	}
	st := rs.Store
	defer func() { err = closeRunStore(st, runID, err, cmd.ErrOrStderr()); closeSandbox(rs, cmd.ErrOrStderr()) }()
	if interactive {
		return runInteractive(cmd, rs, f.approve)
	}
	if f.approve {
		rs.Options.Approve = approver(cmd.InOrStdin(), cmd.ErrOrStderr())
	}
	runner, err := rs.NewRunner()
	if err != nil {
		rs.Discard()
		return setupError(err)
	}
	opts := rs.Options
	srv, err := serveRun(runner, opts, nil, false, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer srv.Close()
	ctx := cmd.Context()
	logPath := runLogPath(absDir(st.Dir()), runner.RunID())
	switch {
	case f.logToStore: // the background process of run --detach
		if err := redirectOutput(logPath); err != nil {
			return exitError(ExitFailure, err)
		}
		srv.SetOutput(false, logPath)
	case cmd.OutOrStdout() == os.Stdout:
		// The terminal closing detaches the run: it goes on, writing to
		// its log file.
		defer onHangup(ctx, func() {
			if redirectOutput(logPath) == nil {
				srv.SetOutput(false, logPath)
			}
		})()
	}
	p := newPrinter(cmd.OutOrStdout(), f.asJSON)
	p.verbose, p.brief, p.tally = f.verbose, f.brief, newIterationTally(opts.Conditions, opts.Config)
	if c := opts.Config; c != nil && c.Agent != nil && c.Model.Provider == "agent" && c.Agent.Price == nil {
		p.priceNote = agent.PriceNote(c.AgentModel(c.Agent.CLI))
	}
	followCtx, stopFollowing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFollowing()
	printed := p.follow(followCtx, runner.Events().Subscribe(followCtx, st.Head().Seq+1))
	out, err := runner.Run(ctx)
	if err != nil {
		stopFollowing() // no closing action will come
	}
	<-printed
	return runResult(p, out, err)
}

// serveRun serves the run's store on its socket, so every other ralph
// command reaches it while it runs; approve, when set, answers plan
// approvals from attached UIs. A store directory open to other users is
// refused (exit 2, with the fix); a socket that cannot be made otherwise
// leaves the run unserved, with a warning.
func serveRun(runner *loop.Runner, opts loop.RunnerOptions, approve func(int, bool) error, localUI bool, errOut io.Writer) (runServer, error) {
	srv, err := serve.Start(serve.Options{Store: opts.Store, Runner: runner, Approve: approve, LocalUI: localUI, Logger: opts.Logger})
	var pe *serve.PermissionError
	switch {
	case errors.As(err, &pe):
		return nil, exitError(ExitUsage, err)
	case err != nil:
		fmt.Fprintf(errOut, "ralph: other commands cannot reach this run while it goes on: %v\n", err)
		return noServer{}, nil
	}
	return srv, nil
}

// runServer is the server of a run's store (*serve.Server), or noServer.
type runServer interface {
	SetOutput(localUI bool, logFile string)
	Close() error
}

// noServer is the server of a run that could not be served.
type noServer struct{}

func (noServer) SetOutput(bool, string) {}
func (noServer) Close() error           { return nil }

// closeRunStore closes a run's store once the run has returned runErr, and
// returns what the command ends with: runErr, or, when the run ended but
// its store was then found lost, that (exit 1). A run whose store was lost
// leaves its record outside the store (lost.go).
func closeRunStore(st *ledger.Store, runID string, runErr error, errOut io.Writer) error {
	cerr := st.Close()
	var lost *ledger.LostError
	switch {
	case errors.As(runErr, &lost):
		return noteLostRun(runID, runErr, errOut)
	case errors.As(cerr, &lost) && (runErr == nil || isSilentSuccess(runErr)):
		return exitError(ExitFailure, noteLostRun(runID, cerr, errOut))
	}
	return runErr // a close past its bound is Run's to report (reportStuck)
}

// isSilentSuccess reports whether err only carries a run's exit status
// (its summary is printed), so a store that then fails to close says so.
func isSilentSuccess(err error) bool { return errors.As(err, &silentError{}) }

// runResult reports how runner.Run returned: the error the run could not go
// on with, or the summary of the run that ended and its exit status.
func runResult(p *printer, out *loop.Outcome, err error) error {
	switch {
	case errors.Is(err, loop.ErrCannotResume):
		return exitError(ExitUsage, err)
	case err != nil:
		return exitError(ExitFailure, err)
	}
	if err := p.summary(out); err != nil {
		return err
	}
	if out.ExitCode != 0 {
		return exitError(out.ExitCode, silentError{})
	}
	return nil
}

// approver asks y/n on in for each plan. Ctrl-C while it waits declines the
// plan, and the runner then aborts the run (the context is cancelled).
func approver(in io.Reader, out io.Writer) func(context.Context, int, string) (bool, error) {
	lines := make(chan string)
	var once sync.Once
	start := func() { // one reader for the whole run; it ends with stdin
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(in)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
	}
	return func(ctx context.Context, iteration int, plan string) (bool, error) {
		once.Do(start)
		for drained := false; !drained; { // an answer typed before this plan was shown is not for it
			select {
			case _, ok := <-lines:
				drained = !ok
			default:
				drained = true
			}
		}
		fmt.Fprintf(out, "iteration %d plan:\n%s\nrun it? [y/n] ", iteration, plan)
		select {
		case line, ok := <-lines:
			if !ok {
				return false, fmt.Errorf("read approval: standard input closed")
			}
			return strings.EqualFold(strings.TrimSpace(line), "y"), nil
		case <-ctx.Done():
			fmt.Fprintln(out)
			return false, nil
		}
	}
}

// printer is the headless view of the run's event bus: one line per event
// (time, iteration, what, outcome). It reads actions from the ledger, so it
// never blocks the runner and never misses one.
type printer struct {
	w       *bufio.Writer
	asJSON  bool
	verbose bool            // also print each stop-condition result
	brief   bool            // print only each iteration's brief line
	tally   *iterationTally // for the brief line after each evaluation; nil: none
	// priceNote says, on the run's first line, how the built-in table
	// prices the agent's configured model when it does not name it
	// ("auto-gemini-2.5 is priced as gemini-2.5-pro (alias)"); "": exactly
	// or not at all.
	priceNote string
}

func newPrinter(w io.Writer, asJSON bool) *printer {
	return &printer{w: bufio.NewWriter(w), asJSON: asJSON}
}

// follow prints events until the run's final state, which the bus delivers
// after its closing action, or ctx's end.
func (p *printer) follow(ctx context.Context, events <-chan loop.Event) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer p.w.Flush()
		ended := false
		for e := range events {
			p.write(&e)
			if len(events) == 0 { // flushed when it has caught up: one write per burst, not per line
				p.w.Flush()
			}
			if e.Kind == loop.EventAction && loop.IsRunEnd(e.Action.Type) {
				ended = true
			}
			if ended && e.Kind == loop.EventState && e.State != loop.StateRunning && e.State != loop.StatePaused {
				return
			}
		}
	}()
	return done
}

// print writes e and flushes it.
func (p *printer) print(e *loop.Event) {
	p.write(e)
	p.w.Flush()
}

// write writes e to the buffer; follow flushes once it has caught up
// with the events, not after each one (an agent's flood is thousands).
func (p *printer) write(e *loop.Event) {
	if p.asJSON {
		switch e.Kind {
		case loop.EventAction:
			p.w.Write(append(ledger.AppendJSON(nil, e.Action), '\n'))
		case loop.EventState, loop.EventWait, loop.EventDropped:
			m := map[string]any{"event": e.Kind.String(), "time": e.Time.UTC().Format(time.RFC3339Nano),
				"run_id": e.RunID, "iteration": e.Iteration}
			switch e.Kind {
			case loop.EventState:
				m["state"] = e.State
			case loop.EventWait:
				m["reason"], m["until"] = e.Text, e.Until.UTC().Format(time.RFC3339Nano)
			case loop.EventDropped:
				m["dropped"] = e.Dropped
			}
			b, _ := json.Marshal(m) // strings and numbers cannot fail to marshal
			p.w.Write(append(b, '\n'))
		case loop.EventAgent:
			p.w.Write(marshalLine(agentJSON(e)))
		}
		return
	}
	at := e.Time.Local().Format("15:04:05")
	if p.brief && e.Kind != loop.EventAction {
		return
	}
	switch e.Kind {
	case loop.EventAction:
		if !p.brief {
			fmt.Fprintf(p.w, "%s it %-3d %s%s%s\n", at, e.Iteration, ledger.Summary(e.Action), p.priceOf(e.Action), sandboxNote(e.Action))
		}
		if p.tally == nil {
			return
		}
		if line := p.tally.take(e.Action); line != "" {
			if p.brief {
				fmt.Fprintln(p.w, line)
			} else {
				fmt.Fprintf(p.w, "%s %s\n", at, line)
			}
		}
	case loop.EventState:
		fmt.Fprintf(p.w, "%s it %-3d state %s\n", at, e.Iteration, e.State)
	case loop.EventWait:
		fmt.Fprintf(p.w, "%s it %-3d waiting until %s: %s\n", at, e.Iteration, loop.WaitUntilText(e.Until, e.Time), e.Text)
	case loop.EventDropped:
		fmt.Fprintf(p.w, "%s it %-3d (%d transient events skipped: output was too slow)\n", at, e.Iteration, e.Dropped)
	case loop.EventAgent:
		p.printAgent(e, at)
	case loop.EventConditions:
		if !p.verbose {
			return
		}
		for _, r := range e.Evaluation.Results {
			state := "not met"
			switch {
			case r.TimedOut:
				state = "timed out"
			case r.Met:
				state = "MET"
			}
			fmt.Fprintf(p.w, "           %-24s %-7s %3d  %-9s %-12s %s\n", r.Name, r.Class, r.Priority, state, r.Detail, r.Reason)
		}
	}
}

// priceOf is what the line of action a says of the agent's prices: on the
// run's first line (RunStarted) how the table prices the configured model
// when it does not name it; on an agent call priced by the table, each
// model it did not name ("priced gemini-3.8-flash as gemini-3.5-flash
// (family)"); "" otherwise.
func (p *printer) priceOf(a *ledger.Action) string {
	switch {
	case a.Type == ledger.RunStarted && p.priceNote != "":
		return " (agent tokens: " + p.priceNote + ")"
	case a.Type == ledger.CapabilityCall && a.Metadata["priced_as"].Str() != "":
		return " (priced " + a.Metadata["priced_as"].Str() + ")"
	}
	return ""
}

func (p *printer) summary(out *loop.Outcome) error {
	if p.asJSON {
		failing := out.StillFailing
		if failing == nil {
			failing = []stop.Unmet{}
		}
		b, err := json.Marshal(map[string]any{"summary": true, "run_id": out.RunID, "state": out.State,
			"class": out.Class, "condition": out.TriggeredBy, "reason": out.Reason, "evidence": out.Evidence,
			"iterations": out.Iterations, "cost_usd": out.CostUSD, "tokens": out.Tokens, "exit_code": out.ExitCode,
			"still_failing": failing})
		if err != nil {
			return err
		}
		if err := writeOut(p.w, string(b)+"\n"); err != nil {
			return err
		}
		return p.w.Flush()
	}
	msg := fmt.Sprintf("run %s %s after %d iteration(s) ($%.4f, %d tokens): %s by %s — %s",
		out.RunID, out.State, out.Iterations, out.CostUSD, out.Tokens, out.Class, out.TriggeredBy, out.Reason)
	if u := stop.UnmetText(out.StillFailing); u != "" {
		msg += " · still failing: " + u
	}
	msg += "\n"
	if err := writeOut(p.w, msg); err != nil {
		return err
	}
	return p.w.Flush()
}

func newRunsCmd() *cobra.Command {
	var storeFlag, natsFlag string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "runs [--json] [--nats URL]",
		Short: "List runs with state, iterations, cost and why they stopped",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if natsFlag != "" {
				if storeFlag != "" {
					return usageErrorf("--store and --nats name two places to read; pass one")
				}
				return fleetRuns(cmd.Context(), cmd.OutOrStdout(), natsFlag, asJSON)
			}
			return listRuns(cmd, storeFlag, asJSON)
		},
	}
	cmd.Flags().StringVar(&storeFlag, "store", "", "store `DIR`")
	cmd.Flags().StringVar(&natsFlag, "nats", "", natsFlagUsage)
	addNATSAuthFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per run")
	return cmd
}

// listRuns prints the runs of the store flag names, and those of its runs
// the store lost (lost.go): a store that is gone lists only those, and
// exits 1.
func listRuns(cmd *cobra.Command, flag string, asJSON bool) error {
	dir, err := commandStoreDir(flag)
	if err != nil {
		return err
	}
	if storeIsNew(dir) {
		lost := lostRunsOf(absDir(dir))
		if len(lost) == 0 {
			return exitError(ExitUsage, fmt.Errorf("no store at %s; run a plan first or pass --store DIR", dir))
		}
		if err := writeRuns(cmd.OutOrStdout(), lostRecords(lost), nil, asJSON); err != nil {
			return err
		}
		return exitError(ExitFailure, silentError{})
	}
	st, err := openReaderAt(cmd.Context(), dir, ledger.Options{}, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer st.Close()
	runs, err := st.ListRuns()
	if err != nil {
		return exitError(ExitFailure, err)
	}
	return writeRuns(cmd.OutOrStdout(), withLost(runs, lostRunsOf(absDir(dir))), st.Served(), asJSON)
}

// writeRuns prints the runs (serve.RunRows: the same fields as GET
// /v1/runs). live is the process serving the store (nil when this process
// opened it).
func writeRuns(w io.Writer, runs []loop.RunRecord, live *serve.Info, asJSON bool) error {
	now := time.Now()
	rows := serve.RunRows(runs, live, now)
	anyLive := false
	for _, r := range rows {
		anyLive = anyLive || r.Attached != nil
	}
	if asJSON {
		for _, r := range rows {
			b, _ := json.Marshal(r) // plain strings, numbers and bools cannot fail to marshal
			if err := writeOut(w, string(b)+"\n"); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	head := "RUN\tSTATE\tSTARTED\tDURATION\tITER\tCOST\tSTOPPED BY\tREASON"
	if anyLive {
		head += "\tPID\tUI\tLOG"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t$%.4f\t%s\t%s", r.ID, r.State, startedColumn(r.Started, now), durationColumn(r), r.Iterations, r.CostUSD, r.Condition, r.Reason)
		if r.Attached != nil {
			ui := "none"
			if *r.Attached {
				ui = "attached"
			}
			log := r.LogFile
			if log == "" {
				log = "-"
			}
			fmt.Fprintf(tw, "\t%d\t%s\t%s", r.PID, ui, log)
		} else if anyLive {
			fmt.Fprint(tw, "\t\t\t")
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func newResumeCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "resume [RUN_ID]",
		Short: "Continue a run after a crash or an abort, with the config it was started with",
		Long: `Continue a run after a crash or an abort, with the config it was started with.
RUN_ID is a run id, a unique prefix of one (see 'ralph runs') or latest;
without it, the latest run (named on stderr).`,
		Args: optionalRunID("resume"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSandboxFlag(f.sandbox); err != nil {
				return err
			}
			cfg, runID, err := snapshotConfig(f.store, runRefArg(args, 0), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return runLoop(cmd, cfg, f, runID)
		},
	}
	cmd.Flags().BoolVar(&f.noTUI, "no-tui", false, "run headless")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "one JSON object per line on stdout")
	cmd.Flags().BoolVar(&f.brief, "brief", false, "headless: print only one line per iteration and the summary")
	cmd.Flags().StringVar(&f.store, "store", "", "store `DIR`")
	addSandboxFlag(cmd.Flags(), &f.sandbox)
	return cmd
}

// snapshotConfig reads the config recorded with the RunStarted of the run
// ref names, and returns it with the run's id.
func snapshotConfig(storeFlag string, ref runRef, errOut io.Writer) (*config.Config, string, error) {
	st, err := existingStore(storeFlag, errOut)
	if err != nil {
		return nil, "", err
	}
	runID, err := resolveRunRef(serve.LocalReader{Store: st}, ref, errOut)
	if err != nil {
		st.Close()
		return nil, "", err
	}
	acts, err := st.ByRun(runID)
	dir := st.Dir()
	st.Close()
	if err != nil {
		return nil, "", exitError(ExitFailure, err)
	}
	for _, a := range acts {
		if a.Type == ledger.RunStarted {
			cfg, err := config.Parse([]byte(a.Metadata["config"].Str()), "run "+runID+" config snapshot", nil)
			if err != nil {
				return nil, "", exitError(ExitUsage, err)
			}
			cfg.Store.Dir = dir
			return cfg, runID, nil
		}
	}
	return nil, "", exitError(ExitUsage, fmt.Errorf("no run %s in this store; `ralph runs` lists them", runID))
}

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
