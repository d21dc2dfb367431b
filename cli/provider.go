package cli

import (
	"fmt"
	"os"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/config"
)

// newProvider builds the plan provider [model].provider names, over the
// engine's capability registry and governance kernel.
func newProvider(cfg *config.Config, _ *engine) (arbiter.Provider, error) {
	switch cfg.Model.Provider {
	case "static":
		src := cfg.Plan.RTFS
		if cfg.Plan.File != "" {
			b, err := os.ReadFile(cfg.Plan.File)
			if err != nil {
				return nil, fmt.Errorf("%s: [plan].file: %w", cfg.File, err)
			}
			src = string(b)
		}
		return arbiter.StaticProvider{Source: src}, nil
	case "script":
		return arbiter.NewScriptProvider(cfg.Model.Script)
	}
	return nil, fmt.Errorf("provider %q is not available yet (it arrives with the arbiter); use \"static\" or \"script\"", cfg.Model.Provider)
}
