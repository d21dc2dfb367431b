package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/e2e"
)

// readmeBlock is the ```console block of README.md whose first line is
// first, one line each.
func readmeBlock(t *testing.T, readme, first string) []string {
	t.Helper()
	i := strings.Index(readme, "```console\n"+first+"\n")
	if i < 0 {
		t.Fatalf("README.md has no console block starting %q", first)
	}
	block := readme[i+len("```console\n"):]
	block = block[:strings.Index(block, "```")]
	return strings.Split(strings.TrimSuffix(block, "\n"), "\n")
}

// What differs between two real runs of the same loop, and what it
// becomes in the comparison.
var readmeVolatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\b\d\d:\d\d:\d\d\b`), "TIME"},
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "ID"},
	{regexp.MustCompile(` \d+(\.\d+)?(ns|µs|ms|s)\b`), ""},
	{regexp.MustCompile(`\b\d+ checkpoints\b`), "N checkpoints"},
	{regexp.MustCompile(`ralph/[0-9a-f]{16}\+[0-9a-f]{8}\+\S+`), "KEY"},
	{regexp.MustCompile(`consistent with checkpoint \S+`), "consistent with checkpoint PATH"},
	{regexp.MustCompile(`"/[^"]*/(\w+\.txt)"`), `"PATH/$1"`},
	{regexp.MustCompile(`\s+# in \S+$`), ""},
}

func readmeNormal(line string) string {
	for _, v := range readmeVolatile {
		line = v.re.ReplaceAllString(line, v.with)
	}
	return line
}

// checkPasted checks that the pasted lines (… stands for lines left out)
// are, in order, lines of the real output, up to readmeVolatile.
func checkPasted(t *testing.T, name string, pasted []string, real string) {
	t.Helper()
	var got []string
	for _, l := range strings.Split(real, "\n") {
		got = append(got, readmeNormal(l))
	}
	at := 0
	for _, p := range pasted {
		if p == "…" {
			continue
		}
		want := readmeNormal(p)
		for at < len(got) && got[at] != want {
			at++
		}
		if at == len(got) {
			t.Errorf("README.md's %s output has a line no real run printed (in this order):\n%s\nthe real output, normalized:\n%s", name, p, strings.Join(got, "\n"))
			return
		}
		at++
	}
}

// Every output pasted in README.md is what a real run prints: make run's
// quickstart and chain verify, and make demo-agent's agent loop with the
// stand-in claude, both run here as the Makefile runs them.
var _ = suite.Add(e2e.Test{Name: "READMEOutputs", Run: func(t *testing.T, e *e2e.E) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, recipe := range []string{"\t$(GO) build -o $(BIN) .\n", "\t$(BIN) run examples/quickstart/ralph.toml --no-tui\n",
		"\t$(BIN) chain verify --store examples/quickstart/.ralph\n", "\texamples/agent-demo/run.sh \"$(CURDIR)/$(BIN)\"\n"} {
		if !strings.Contains(string(mk), recipe) {
			t.Fatalf("the Makefile no longer runs %q; this test runs what it runs", strings.TrimSpace(recipe))
		}
	}

	e.Run("make run", func(t *testing.T, e *e2e.E) {
		t.Parallel()
		store := filepath.Join(t.TempDir(), "store")
		var real strings.Builder
		real.WriteString("go build -o bin/ralph .\nbin/ralph run examples/quickstart/ralph.toml --no-tui\n")
		out, errOut, code := e.Ralph("run", "../examples/quickstart/ralph.toml", "--no-tui", "--store", store).Run()
		if code != 0 {
			t.Fatalf("quickstart: exit %d: %s", code, errOut)
		}
		real.WriteString(out + errOut)
		real.WriteString("bin/ralph chain verify --store examples/quickstart/.ralph\n")
		out, errOut, code = e.Ralph("chain", "verify", "--store", store).Run()
		if code != 0 {
			t.Fatalf("chain verify: exit %d: %s", code, errOut)
		}
		real.WriteString(out + errOut)
		checkPasted(t, "make run", readmeBlock(t, readme, "$ make run")[1:], real.String())
	})

	e.Run("make demo-agent", func(t *testing.T, e *e2e.E) {
		t.Parallel()
		// Its stderr with its stdout, in the order it printed them.
		out, _, code := e.Command("sh", "-c", `exec "$0" "$@" 2>&1`, filepath.Join("..", "examples", "agent-demo", "run.sh"), e.Bin(), t.TempDir()).Run()
		if code != 0 {
			t.Fatalf("examples/agent-demo/run.sh: exit %d\n%s", code, out)
		}
		checkPasted(t, "agent loop", readmeBlock(t, readme, `$ ralph init --agent claude --test "go test ./..."`), out)
	})
}})
