package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time:
//
//	go build -ldflags "-X github.com/ralphloop/ralph/cli.version=v0.1.0"
//
// It is written only by the linker and never changes at run time.
var version = "dev"

// versionString is the version of this binary: the linker-set version,
// else the module version recorded by `go install module@version`, else
// "dev"; followed by the Go toolchain that built it.
func versionString() string {
	v := version
	if v == "dev" {
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	return fmt.Sprintf("%s (%s %s/%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print ralph's version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeOut(cmd.OutOrStdout(), "ralph "+versionString()+"\n")
		},
	}
}
