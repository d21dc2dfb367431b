package cli

import (
	"context"
	"errors"
	"log/slog"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/notify"
	"github.com/ralphloop/ralph/serve"
)

// attachNotify gives a terminal attached to runID (ralph attach) the run's
// terminal notifications: the [[notify]] sinks of the config the run
// recorded whose rows reach the terminal ralph runs in (notify.Attached),
// fed by c's event stream from now on. The run's process keeps every
// other sink, and records their failures; an attached terminal's are not
// recorded (it does not write to the store). The func it returns stops it.
func attachNotify(ctx context.Context, c *serve.Client, runID string) func() {
	var snapshot string
	err := c.Select(ledger.Filter{RunID: runID}, func(a ledger.Action) error {
		if a.Type == ledger.RunStarted {
			snapshot = a.Metadata["config"].Str()
			return errFound
		}
		return nil
	})
	if (err != nil && !errors.Is(err, errFound)) || snapshot == "" {
		return func() {}
	}
	cfg, err := config.Parse([]byte(snapshot), "run "+runID+" config snapshot", func(string) string { return "" })
	if err != nil {
		return func() {}
	}
	var term []config.Notify
	for _, s := range cfg.Notify {
		if notify.Attached(&s) {
			term = append(term, s)
		}
	}
	if len(term) == 0 {
		return func() {}
	}
	// Failures go nowhere: the live UI owns this terminal, and a log line
	// would tear it.
	n, err := notify.New(notify.Options{Sinks: term, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	events, err := c.Events(ctx, c.Head().Seq+1, false)
	if err != nil {
		cancel()
		return func() {}
	}
	done := n.Follow(ctx, events)
	return func() { cancel(); <-done }
}

// errFound ends a scan of the chain early.
var errFound = errors.New("found")
