// Command ralph is a terminal agent-loop runner; see README.md.
package main

import (
	"os"

	"github.com/ralphloop/ralph/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
