package notify_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/notify"
)

// argSink is a sink that exists only in this test: it runs its cmd with
// the notification's text as one more argument.
type argSink struct{ argv []string }

func (s argSink) Send(ctx context.Context, e notify.Event) error {
	return exec.CommandContext(ctx, s.argv[0], append(s.argv[1:], e.Text)...).Run()
}

// A new sink is one row and its Sender, nothing else: with just those, the
// one config check (assemble.Check) holds a table of it to its row (its
// own check with file:line, its defaults, its field refused on another
// kind, its name among the kinds), a run built by assemble.NewRun sends
// to it, ralph attach and a worker's policy read its row (Attached, Runs:
// the default policy refuses the program it runs), and the docs check
// sees it is undocumented.
func TestASinkIsOneRow(t *testing.T) {
	err := notify.Register(notify.Sink{Name: "test_arg", Fields: []string{"cmd"}, Timeout: 3 * time.Second, Retries: 0,
		Check: func(n *config.Notify) error {
			if len(n.Cmd) == 0 {
				return fmt.Errorf("a test_arg sink needs cmd, the program it runs with the text")
			}
			return nil
		},
		Runs: func(n *config.Notify) string { return n.Cmd[0] },
		New:  func(n *config.Notify, _ *notify.Options) (notify.Sender, error) { return argSink{n.Cmd}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { notify.Unregister("test_arg") })
	dir := t.TempDir()
	log := filepath.Join(dir, "notes")
	loop := fmt.Sprintf("[plan]\nrtfs = '(call :ccos.echo {:message \"hi\"})'\n[loop]\nworkdir = %q\ncheckpoints = false\n[store]\nsync_writes = false\n[[stop]]\nname = \"once\"\nkind = \"max_iterations\"\nmax = 1\n", dir)
	sink := fmt.Sprintf("[[notify]]\nkind = \"test_arg\"\ncmd = [\"sh\", \"-c\", \"printf '%%s\\\\n' \\\"$1\\\" >> %s\", \"sh\"]\n", log)

	cfg := parse(t, loop+sink)
	if _, err := assemble.Check(cfg, assemble.CheckOptions{Paths: assemble.NoPaths}); err != nil {
		t.Fatal(err)
	}
	n := cfg.Notify[0]
	if n.Name != "test_arg-1" || n.Timeout.Duration != 3*time.Second || *n.Retries != 0 {
		t.Errorf("the new sink's table checked as %+v, want its row's defaults", n)
	}
	if notify.Runs(&n) != "sh" || notify.Attached(&n) {
		t.Errorf("its row read as running %q, attached %t", notify.Runs(&n), notify.Attached(&n))
	}
	if err := fleet.ApplyPolicy(nil, parse(t, loop+sink), ""); err == nil || !strings.Contains(err.Error(), `its [[notify]] test_arg-1 runs "sh"`) {
		t.Errorf("a worker's default policy took the new sink's program: %v", err)
	}
	for src, want := range map[string]string{
		loop + "[[notify]]\nkind = \"test_arg\"\n":                `ralph.toml:12: [[notify]] test_arg-1: a test_arg sink needs cmd, the program it runs with the text`,
		loop + "[[notify]]\nkind = \"terminal\"\ncmd = [\"x\"]\n": `ralph.toml:12: [[notify]] terminal-1: cmd is for kind = "command" or "test_arg"`,
		loop + "[[notify]]\nkind = \"pager\"\n":                   `ralph.toml:12: [[notify]] pager-1: kind "pager" is not one of terminal, desktop, webhook, command, test_arg`,
	} {
		if _, err := assemble.Check(parse(t, src), assemble.CheckOptions{Paths: assemble.NoPaths}); err == nil || err.Error() != want {
			t.Errorf("got %v, want %s", err, want)
		}
	}

	run, err := assemble.NewRun(context.Background(), parse(t, loop+sink), assemble.RunOptions{Open: assemble.InMemory})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Store.Close()
	r, err := run.NewRunner()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the new sink's run_ended", func() bool { // the run's end waits for its sinks only so long
		b, _ := os.ReadFile(log)
		return strings.Contains(string(b), "stopped after 1 iteration(s)")
	})
	if u := notify.Undocumented(t); !slices.Contains(u, "test_arg") {
		t.Errorf("the docs check does not see the new sink: %v", u)
	}
	if err := notify.Register(notify.Sink{Name: "test_arg", Timeout: time.Second, New: func(*config.Notify, *notify.Options) (notify.Sender, error) { return nil, nil }}); err == nil {
		t.Error("a second row of the same name was taken")
	}
	if err := notify.Register(notify.Sink{Name: "test_pager", Fields: []string{"number"}, Timeout: time.Second, New: func(*config.Notify, *notify.Options) (notify.Sender, error) { return nil, nil }}); err == nil {
		t.Error("a row taking a field [[notify]] does not have was taken")
	}
}

func parse(t *testing.T, src string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(src), "ralph.toml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
