package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
)

// The headless printer prints the run's final state, which the bus
// delivers right after the closing Run* action, before it stops.
func TestPrinterPrintsTheFinalState(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, asJSON := range []bool{false, true} {
		events := make(chan loop.Event, 8)
		events <- loop.Event{Kind: loop.EventAction, Time: now, RunID: "r", Action: &ledger.Action{Type: ledger.RunStarted, Seq: 1, RunID: "r", Success: true}}
		events <- loop.Event{Kind: loop.EventState, Time: now, RunID: "r", State: loop.StateRunning}
		events <- loop.Event{Kind: loop.EventAction, Time: now, RunID: "r", Iteration: 1, Action: &ledger.Action{Type: ledger.RunStopped, Seq: 2, RunID: "r"}}
		events <- loop.Event{Kind: loop.EventState, Time: now, RunID: "r", Iteration: 1, State: loop.StateStopped}
		var out bytes.Buffer
		p := newPrinter(&out, asJSON)
		ctx, cancel := context.WithCancel(context.Background())
		done := p.follow(ctx, events)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the printer did not finish after the final state")
		}
		cancel()
		text := out.String()
		if asJSON {
			lines := strings.Split(strings.TrimSpace(text), "\n")
			var last map[string]any
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last["event"] != "state" || last["state"] != "stopped" {
				t.Errorf("--json: last line %q, want the stopped state event", lines[len(lines)-1])
			}
		} else if !strings.Contains(text, "state stopped") {
			t.Errorf("text output lacks the final state:\n%s", text)
		}
	}
}

// Resuming a run that already ended is a usage error (exit 2) naming what
// to do instead, not a run-time failure.
func TestResumeAnEndedRunIsAUsageError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ralph.toml")
	store := filepath.Join(dir, "store")
	if err := os.WriteFile(cfg, []byte("[plan]\nrtfs = '(step \"A\" (call :ccos.echo {:message \"a\"}))'\n[[stop]]\nkind = \"max_iterations\"\nmax = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := Run(context.Background(), []string{"run", cfg, "--json", "--store", store}, strings.NewReader(""), &out, &errOut); code != 3 {
		t.Fatalf("run: exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var sum map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	code := Run(context.Background(), []string{"resume", sum["run_id"].(string), "--store", store}, strings.NewReader(""), &out, &errOut)
	if code != ExitUsage || !strings.Contains(errOut.String(), "already ended") {
		t.Errorf("resume of an ended run: exit %d, stderr %q; want 2 and why", code, errOut.String())
	}
}
