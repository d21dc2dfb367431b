package notify

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/ralphloop/ralph/config"
)

// terminal writes OSC 9 and OSC 777 desktop notifications and the bell to
// the controlling terminal. Inside tmux the OSCs travel in its
// passthrough (tmux needs `set -g allow-passthrough on` to forward them);
// the bell reaches tmux itself.
type terminal struct {
	open func() (io.WriteCloser, error)
	tmux bool
}

func newTerminal(_ *config.Notify, o *Options) (Sender, error) {
	return &terminal{open: openTTY, tmux: o.Env("TMUX") != ""}, nil
}

func openTTY() (io.WriteCloser, error) {
	f, err := os.OpenFile("/dev/tty", os.O_WRONLY|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("no terminal to notify (a detached run has none): %w", err)
	}
	return f, nil
}

// Sequences are the bytes the terminal sink writes for e.
func Sequences(e Event, tmux bool) []byte {
	msg, title := clean(e.Text), clean(strings.ReplaceAll(Title(e), ";", ","))
	osc := []string{"\x1b]9;" + msg + "\x07", "\x1b]777;notify;" + title + ";" + msg + "\x07"}
	var b strings.Builder
	for _, s := range osc {
		if tmux {
			s = "\x1bPtmux;" + strings.ReplaceAll(s, "\x1b", "\x1b\x1b") + "\x1b\\"
		}
		b.WriteString(s)
	}
	b.WriteByte('\a')
	return []byte(b.String())
}

// clean drops control characters, which would end or corrupt the sequence.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
}

func (t *terminal) Send(_ context.Context, e Event) error {
	w, err := t.open()
	if err != nil {
		return err
	}
	_, err = w.Write(Sequences(e, t.tmux))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// Title is a notification's one-line summary.
func Title(e Event) string {
	switch e.Event {
	case RunEnded:
		return "ralph: run " + e.State
	case ApprovalNeeded:
		return "ralph: approval needed"
	case RateLimitWait:
		return "ralph: waiting for a usage limit"
	case RateLimitOver:
		return "ralph: the wait is over"
	case NoProgressWarning:
		return "ralph: no progress"
	case Budget:
		return fmt.Sprintf("ralph: %d%% of the budget spent", e.Percent)
	}
	return "ralph"
}
