package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/internal/detach"
	"github.com/ralphloop/ralph/internal/sealenv"
	"github.com/ralphloop/ralph/internal/usage"
	"github.com/ralphloop/ralph/rtfs"
)

// Exit codes shared by every command (DESIGN §3).
const (
	ExitOK        = 0 // success
	ExitFailure   = 1 // failed at run time, or an internal error
	ExitUsage     = 2 // bad usage, unreadable input, or a program that does not read or compile
	ExitCancelled = 4 // cancelled by the user (Ctrl-C)
	// ExitBrokenPipe is the status of a command whose output was closed
	// before it finished (ralph chain show | head): what a shell reports
	// for a process a SIGPIPE ended, though this one closed its store.
	ExitBrokenPipe = 128 + 13
)

// Main runs ralph with the process's arguments and standard streams and
// returns the exit code. It first hides the environment's secrets
// (internal/sealenv). The first Ctrl-C (or SIGTERM) cancels the running
// command's context; after that the default handler is restored, so a
// second Ctrl-C ends the process at once. SIGHUP cancels it too, except
// for a run, which detaches (detach.Signals).
func Main(args []string) int {
	if err := sealenv.Hide(); err != nil {
		fmt.Fprintf(os.Stderr, "ralph: warning: %v\n", err)
	}
	ctx, stop := detach.Signals(context.Background(), func(why string) { armWatchdog(why, os.Stderr) })
	defer stop()
	return Run(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

// Run executes one ralph command line against the given streams and
// returns its exit code. It never panics: a panic is reported as an
// internal error with exit code 1.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "ralph: internal error: %v; please report it with the command that caused it\n", r)
			code = ExitFailure
		}
		code = reportStuck(stderr, code)
	}()
	if args == nil {
		args = []string{} // cobra reads os.Args when given nil
	}
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	signedIn := &signIns{}
	cmd, err := root.ExecuteContextC(context.WithValue(ctx, signInsKey{}, signedIn))
	if err == nil {
		return ExitOK
	}
	if refused := signedIn.refusal(); refused != nil {
		// What failed after it was its consequence (a timeout).
		fmt.Fprintf(stderr, "ralph: %s\n", refused)
		return ExitUsage
	}
	return report(stderr, cmd, err)
}

// report writes err to stderr and returns its exit code. Errors that are
// not a *cliError come from cobra's argument and flag parsing and are
// usage errors.
func report(stderr io.Writer, cmd *cobra.Command, err error) int {
	code, usage := ExitUsage, true
	var ce *cliError
	if errors.As(err, &ce) {
		code, usage = ce.code, ce.usage
	}
	var re *rtfs.Error
	switch {
	case isBrokenPipe(err):
		return ExitBrokenPipe // the reader went away (| head): nothing to say, nobody to say it to
	case errors.As(err, &silentError{}):
		// the explanation is already on stdout
	case errors.As(err, &re):
		fmt.Fprintln(stderr, re.Error())
	case usage:
		fmt.Fprintf(stderr, "ralph: %s\n", firstLine(err.Error()))
		if cmd == nil {
			cmd = &cobra.Command{Use: "ralph"}
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	default:
		fmt.Fprintf(stderr, "ralph: %s\n", err)
	}
	return code
}

// cliError is an error with the exit code it should produce.
type cliError struct {
	code  int
	usage bool // print a pointer to --help after the message
	err   error
}

func (e *cliError) Error() string { return e.err.Error() }
func (e *cliError) Unwrap() error { return e.err }

// silentError carries an exit code whose explanation is already on stdout
// (a predicate's answer, a run's summary); report prints nothing for it.
type silentError struct{}

func (silentError) Error() string { return "the explanation is on standard output" }

// usageErrorf reports a command line that cannot be run as given.
func usageErrorf(format string, args ...any) error {
	return &cliError{code: ExitUsage, usage: true, err: fmt.Errorf(format, args...)}
}

// exitError attaches an exit code to err.
func exitError(code int, err error) error {
	return &cliError{code: code, err: err}
}

// commandError is an error of a package below cli as the command's, the
// one place their errors get exit codes: a usage.Error is a usage error
// (exit 2, pointing at --help when it asks to), an error that is already
// the command's stays as it is, and any other failed at run time (exit 1).
func commandError(err error) error {
	var ce *cliError
	var ue *usage.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return err
	case errors.As(err, &ue):
		return &cliError{code: ExitUsage, usage: ue.Help, err: err}
	}
	return exitError(ExitFailure, err)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "ralph",
		Short: "ralph runs agent loops: plans in RTFS, governed execution, a signed causal chain",
		Long: `ralph is a terminal agent-loop runner. It asks a model for a plan written in
RTFS, checks and executes it through governed capabilities, records every
event on a hash-chained causal chain, and evaluates stop conditions after
each iteration.

Start with 'ralph init', then 'ralph run'; 'ralph runs' lists what ran.`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// Root takes arbitrary args so that an unknown command reaches RunE,
		// which reports it as one sentence with suggestions.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		},
	}
	root.SuggestionsMinimumDistance = 2
	root.SetVersionTemplate("ralph {{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		// "ralph evl -e 1" fails on root's flags before RunE runs; the
		// unknown command is the real mistake.
		if !cmd.HasParent() && cmd.Flags().NArg() > 0 {
			return unknownCommand(cmd, cmd.Flags().Arg(0))
		}
		return usageErrorf("%s", flagValueMessage(err))
	})
	root.AddCommand(newEvalCmd(), newFmtCmd(), newVersionCmd(), newExecCmd(), newChainCmd(), newPredicateCmd(), newHistoryCmd(),
		newRunCmd(), newRunsCmd(), newResumeCmd(), newInitCmd(), newViewCmd(), newAttachCmd())
	root.AddCommand(newMCPCmd())
	root.AddCommand(newWebCmd())
	root.AddCommand(newPlanCmd())
	root.AddCommand(newIRCmd())
	root.AddCommand(newFleetCmd(), newSubmitCmd())
	root.AddCommand(newWorkerCmd())
	root.AddCommand(newDiffCmd(), newRollbackCmd(), newReplayCmd())
	return root
}

// unknownCommand reports name as not a command of root, suggesting the
// closest one.
func unknownCommand(root *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q", name)
	if s := root.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return usageErrorf("%s", msg)
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("%s takes no arguments, got %q", cmd.Name(), args[0])
	}
	return nil
}

// flagValueRe matches pflag's message for a flag value that does not parse,
// which quotes Go's strconv error.
var flagValueRe = regexp.MustCompile(`^invalid argument "(.*)" for "(?:-\w, )?(--[\w-]+)" flag: (?:strconv\.Parse(Int|Uint|Float|Bool)|time: )`)

// flagValueMessage says what a flag takes instead of quoting strconv.
func flagValueMessage(err error) string {
	m := flagValueRe.FindStringSubmatch(err.Error())
	if m == nil {
		return err.Error()
	}
	want := map[string]string{"Int": "a whole number", "Uint": "a whole number", "Float": "a number",
		"Bool": "true or false", "": `a duration such as "30s"`}[m[3]]
	return fmt.Sprintf("%s takes %s, not %q", m[2], want, m[1])
}

// isBrokenPipe reports whether err is a write to a reader that has gone
// (ralph chain show | head): not worth a message.
func isBrokenPipe(err error) bool { return errors.Is(err, syscall.EPIPE) }
