package stop

import (
	"testing"

	"github.com/ralphloop/ralph/config"
)

// The budgets the UI and the headless brief measure against: the
// smallest of each kind's stop conditions, within the config-wide caps.
func TestBudgetsWithinCaps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		toml  string
		iters int
		usd   float64
	}{
		{"none", "", 0, 0},
		{"stops", "[[stop]]\nkind = \"max_iterations\"\nmax = 9\n[[stop]]\nkind = \"max_iterations\"\nmax = 4\n[[stop]]\nkind = \"max_cost\"\nusd = 2.5\n", 4, 2.5},
		{"caps smaller", "[loop]\nmax_iterations = 3\n[governance]\nmax_cost_usd = 1.0\n[[stop]]\nkind = \"max_iterations\"\nmax = 9\n[[stop]]\nkind = \"max_cost\"\nusd = 2.5\n", 3, 1},
		{"caps alone", "[loop]\nmax_iterations = 7\n[governance]\nmax_cost_usd = 0.5\n", 7, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse([]byte("[plan]\nrtfs = '(step \"A\" (call :ccos.echo {:message \"a\"}))'\n"+tc.toml), "ralph.toml", func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			conds, err := FromConfig(c.Stop, c.File)
			if err != nil {
				t.Fatal(err)
			}
			caps := Limits{Iterations: c.Loop.MaxIterations, CostUSD: c.Governance.MaxCostUSD}
			for _, b := range []Limits{Budgets(conds).Within(caps), SpecBudgets(c.Stop).Within(caps)} {
				if b.Iterations != tc.iters || b.CostUSD != tc.usd {
					t.Errorf("budgets %+v, want %d iterations, $%g", b, tc.iters, tc.usd)
				}
			}
		})
	}
}
