package cli

import (
	"context"
	"io"
	"testing"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/assemble"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
	"github.com/ralphloop/ralph/stop"
)

// TestLoopExamplesLoad checks that every loop example's config loads, its
// stop conditions compile and its static plan passes admission.
func TestLoopExamplesLoad(t *testing.T) {
	for _, path := range []string{"../examples/quickstart/ralph.toml", "../examples/ralph-classic/ralph.toml"} {
		cfg, err := config.Load(path, func(string) string { return "" })
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if _, err := stop.FromConfig(cfg.Stop, cfg.File); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		st, err := openStore(ledger.Options{Dir: t.TempDir()}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		eng, err := assemble.PlanEngine(cfg, st)
		if err != nil {
			t.Fatal(err)
		}
		src := cfg.Plan.RTFS
		if cfg.Model.Provider == "agent" { // the plan the agent loop writes for its first iteration
			p, err := assemble.NewProvider(cfg, eng)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := p.Plan(context.Background(), arbiter.PlanRequest{Iteration: 1})
			if err != nil || resp.Mode != "agent" {
				t.Fatalf("%s: agent plan: %v (mode %q)", path, err, resp.Mode)
			}
			src = resp.Source
		}
		forms, err := rtfs.Read(src, path)
		if err != nil {
			t.Fatal(err)
		}
		if d := eng.Governance.Admit(path, forms); !d.Allowed {
			t.Errorf("%s: plan refused: %v", path, d.Reasons)
		}
		st.Close()
	}
}
