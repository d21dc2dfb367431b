package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/rtfs"
)

// Names given to programs that do not come from a file.
const (
	exprName  = "<expr>"
	stdinName = "<stdin>"
)

func newEvalCmd() *cobra.Command {
	var (
		expr string
		lim  rtfs.Limits
	)
	cmd := &cobra.Command{
		Use:   "eval [-e EXPR | FILE | -]",
		Short: "Evaluate pure RTFS and print the result in canonical form",
		Long: `Evaluate a pure RTFS program (no call or step forms) and print the value of
its last form in canonical form.

The program comes from -e EXPR, from FILE, or from standard input with -.
Exit status: 0 on success, 1 when evaluation fails at run time, 2 when the
program cannot be read or compiled, 4 when cancelled with Ctrl-C. Errors
are printed as file:line:col: message, with -e input named <expr>.`,
		Example: `  ralph eval -e '(+ 1 2)'
  ralph eval examples/rtfs/data.rtfs
  echo '(str "a" "b")' | ralph eval -`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case cmd.Flags().Changed("expr") && len(args) > 0:
				return usageErrorf("give either -e EXPR or FILE, not both")
			case !cmd.Flags().Changed("expr") && len(args) == 0:
				return usageErrorf("eval needs a program: -e EXPR, FILE, or - to read standard input")
			case len(args) > 1:
				return usageErrorf("eval takes one FILE, got %d arguments", len(args))
			}
			return checkLimits(lim)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			src, name := expr, exprName
			if !cmd.Flags().Changed("expr") {
				var err error
				if src, name, err = readInput(cmd.InOrStdin(), args[0]); err != nil {
					return err
				}
			}
			prog, err := rtfs.CompileString(src, rtfs.Options{File: name, Mode: rtfs.Pure, Log: cmd.ErrOrStderr()})
			if err != nil {
				return exitError(ExitUsage, err)
			}
			v, err := prog.EvalWith(cmd.Context(), lim)
			if err != nil {
				return evalError(err)
			}
			if n, ok := rtfs.Size(v, rtfs.MaxPrintNodes); !ok {
				return exitError(ExitFailure, fmt.Errorf("%s: the result has more than %d nodes (at least %d) and is too large to print; return a smaller value, such as its count", name, rtfs.MaxPrintNodes, n))
			}
			return writeOut(cmd.OutOrStdout(), rtfs.Print(v)+"\n")
		},
	}
	f := cmd.Flags()
	f.StringVarP(&expr, "expr", "e", "", "evaluate `EXPR` instead of a file")
	f.Int64Var(&lim.Fuel, "fuel", 0, fmt.Sprintf("evaluation step budget (0 means %d)", rtfs.DefaultFuel))
	f.IntVar(&lim.MaxDepth, "max-depth", 0, fmt.Sprintf("deepest nesting of function calls (0 means %d)", rtfs.DefaultMaxDepth))
	return cmd
}

func newFmtCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "fmt [FILE | -]",
		Short: "Print RTFS in canonical form",
		Long: `Print an RTFS program in canonical form: one top-level form per line, single
spaces, map keys sorted, no commas. Comments and #_ discards are dropped.

The program comes from FILE, or from standard input with -. Exit status is
2 when the program cannot be read.`,
		Example: `  ralph fmt plan.rtfs
  echo '{:b 1, :a 2}' | ralph fmt -`,
		Args: oneInput("fmt"),
		RunE: func(cmd *cobra.Command, args []string) error {
			forms, err := readForms(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			return writeOut(cmd.OutOrStdout(), rtfs.PrintProgram(forms))
		},
	}
}

// readInput reads the program named by arg: a file path, or - for stdin.
// It returns the source and the name to use in error positions.
func readInput(stdin io.Reader, arg string) (src, name string, err error) {
	if arg == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return "", "", exitError(ExitUsage, fmt.Errorf("read standard input: %w", err))
		}
		return string(b), stdinName, nil
	}
	b, err := os.ReadFile(arg)
	if err != nil {
		// *fs.PathError already reads "open FILE: reason".
		return "", "", exitError(ExitUsage, err)
	}
	return string(b), arg, nil
}

// readForms reads the program named by arg (a file path, or - for stdin);
// one that cannot be read or does not parse is a usage error.
func readForms(stdin io.Reader, arg string) ([]*rtfs.Node, error) {
	src, name, err := readInput(stdin, arg)
	if err != nil {
		return nil, err
	}
	forms, err := rtfs.Read(src, name)
	if err != nil {
		return nil, exitError(ExitUsage, err)
	}
	return forms, nil
}

// evalError is the exit status of a program that failed at run time:
// cancelled (Ctrl-C) or failed.
func evalError(err error) error {
	var re *rtfs.Error
	if errors.As(err, &re) && re.Type == rtfs.ErrCancelled {
		return exitError(ExitCancelled, err)
	}
	return exitError(ExitFailure, err)
}

func checkLimits(lim rtfs.Limits) error {
	if lim.Fuel < 0 {
		return usageErrorf("--fuel must be 0 (the default) or positive, got %d", lim.Fuel)
	}
	if lim.MaxDepth < 0 {
		return usageErrorf("--max-depth must be 0 (the default) or positive, got %d", lim.MaxDepth)
	}
	return nil
}

func writeOut(w io.Writer, s string) error {
	if _, err := io.WriteString(w, s); err != nil {
		return exitError(ExitFailure, fmt.Errorf("write output: %w", err))
	}
	return nil
}
