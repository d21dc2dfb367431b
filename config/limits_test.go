package config

import "testing"

// The budgets the UI and the headless brief measure against: the
// smallest of each kind's stop conditions and its config-wide cap.
func TestIterationAndCostLimits(t *testing.T) {
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
			c, err := Parse([]byte("[plan]\nrtfs = '(step \"A\" (call :ccos.echo {:message \"a\"}))'\n"+tc.toml), "ralph.toml", func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			if got := c.IterationLimit(); got != tc.iters {
				t.Errorf("IterationLimit() = %d, want %d", got, tc.iters)
			}
			if got := c.CostLimit(); got != tc.usd {
				t.Errorf("CostLimit() = %g, want %g", got, tc.usd)
			}
		})
	}
}
