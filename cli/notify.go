package cli

import (
	"context"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/loop"
	"github.com/ralphloop/ralph/notify"
)

// notifyFollower is the run's [[notify]] sinks as a loop.RunnerOptions
// Follow, or nil when the config has none. A sink's failure is logged
// (slog's default logger, which the live UI shows) and recorded on st as a
// NotifyFailed action.
func notifyFollower(cfg *config.Config, st *ledger.Store) (func(context.Context, <-chan loop.Event) <-chan struct{}, error) {
	if len(cfg.Notify) == 0 {
		return nil, nil
	}
	n, err := notify.New(notify.Options{Sinks: cfg.Notify, File: cfg.File, Workdir: cfg.Loop.Workdir,
		Record: func(ctx context.Context, a *ledger.Action) error {
			_, err := st.Append(ctx, a)
			return err
		}})
	if err != nil {
		return nil, err
	}
	return n.Follow, nil
}
