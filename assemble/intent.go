package assemble

import (
	"fmt"
	"os"

	"github.com/ralphloop/ralph/arbiter"
	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/rtfs"
)

// Intent is [intent]: the goal, the params and the prompt file's text.
func Intent(cfg *config.Config) (arbiter.Intent, error) {
	params, err := IntentParams(cfg)
	if err != nil {
		return arbiter.Intent{}, err
	}
	in := arbiter.Intent{Goal: cfg.Intent.Goal, Params: params}
	if cfg.Intent.PromptFile != "" {
		b, err := os.ReadFile(cfg.Intent.PromptFile)
		if err != nil {
			return arbiter.Intent{}, configError(fmt.Errorf("%s: [intent].prompt_file: %w", cfg.File, err))
		}
		in.Prompt = string(b)
	}
	return in, nil
}

// IntentParams is [intent].params as an RTFS map with keyword keys.
func IntentParams(cfg *config.Config) (rtfs.Value, error) {
	params, err := paramsValue(cfg.Intent.Params)
	if err != nil {
		return rtfs.Nil, configError(fmt.Errorf("%s: [intent].params: %w", cfg.File, err))
	}
	return params, nil
}

// paramsValue converts decoded TOML params to an RTFS map with keyword keys.
func paramsValue(p map[string]any) (rtfs.Value, error) {
	b := rtfs.NewMapBuilder(len(p))
	for k, v := range p {
		rv, err := goValue(v)
		if err != nil {
			return rtfs.Nil, fmt.Errorf("%s: %w", k, err)
		}
		b.Set(rtfs.Keyword(k), rv)
	}
	return rtfs.MapValue(b.Map()), nil
}

func goValue(v any) (rtfs.Value, error) {
	switch x := v.(type) {
	case nil:
		return rtfs.Nil, nil
	case string:
		return rtfs.String(x), nil
	case bool:
		return rtfs.Bool(x), nil
	case int64:
		return rtfs.Int(x), nil
	case int:
		return rtfs.Int(int64(x)), nil
	case float64:
		return rtfs.Float(x), nil
	case []any:
		out := make([]rtfs.Value, len(x))
		for i, it := range x {
			rv, err := goValue(it)
			if err != nil {
				return rtfs.Nil, err
			}
			out[i] = rv
		}
		return rtfs.Vector(out), nil
	case map[string]any:
		return paramsValue(x)
	}
	return rtfs.Nil, fmt.Errorf("unsupported value %v of type %T", v, v)
}
