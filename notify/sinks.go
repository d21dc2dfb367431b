package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/ralphloop/ralph/internal/procgroup"
)

// command runs argv with the notification as JSON on its standard input,
// in the workdir, contained like shell.exec (its own process group, killed
// whole at the timeout).
type command struct {
	argv    []string
	dir     string
	timeout time.Duration
}

func (c *command) Send(ctx context.Context, e Event) error {
	body, err := json.Marshal(e)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
	cmd.Dir = c.dir
	cmd.Stdin = bytes.NewReader(append(body, '\n'))
	out := procgroup.CappedBuffer{Limit: 64 << 10}
	cmd.Stdout, cmd.Stderr = &out, &out
	_, err = procgroup.RunContained(cmd, time.Second, procgroup.StartOptions{})
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("%s did not finish within %s; its process group was killed", c.argv[0], c.timeout)
	case errors.As(err, &exitErr):
		return fmt.Errorf("%s exited with status %d: %s", c.argv[0], exitErr.ExitCode(), Tail(out.String(), 400))
	}
	return fmt.Errorf("%s could not start: %v; check cmd in [[notify]]", c.argv[0], err)
}

// Tail is the last n bytes of s, trimmed, cut at a rune boundary.
func Tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for i := 0; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 {
			return "…" + s[i:]
		}
	}
	return "…" + s
}

// terminal writes OSC 9 and OSC 777 desktop notifications and the bell to
// the controlling terminal. Inside tmux the OSCs travel in its
// passthrough (tmux needs `set -g allow-passthrough on` to forward them);
// the bell reaches tmux itself.
type terminal struct {
	open func() (io.WriteCloser, error)
	tmux bool
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

// desktop sends freedesktop notifications
// (org.freedesktop.Notifications.Notify) on the session bus that
// DBUS_SESSION_BUS_ADDRESS names.
type desktop struct {
	address string
	timeout time.Duration
}

// Notifications' bus name, object and method (the freedesktop
// Desktop Notifications Specification).
const (
	dbusName   = "org.freedesktop.Notifications"
	dbusPath   = "/org/freedesktop/Notifications"
	dbusNotify = "org.freedesktop.Notifications.Notify"
)

func (d *desktop) Send(ctx context.Context, e Event) error {
	if d.address == "" {
		return errors.New("no session bus: DBUS_SESSION_BUS_ADDRESS is not set (desktop notifications need a desktop session)")
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	conn, err := dbus.Connect(d.address, dbus.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("connect to the session bus: %w", err)
	}
	defer conn.Close()
	urgency := byte(1) // normal
	if e.Event == ApprovalNeeded || (e.Event == RunEnded && e.Class != "success") {
		urgency = 2 // critical: a person must act
	}
	call := conn.Object(dbusName, dbusPath).CallWithContext(ctx, dbusNotify, 0,
		"ralph", uint32(0), "", Title(e), e.Text, []string{},
		map[string]dbus.Variant{"urgency": dbus.MakeVariant(urgency)}, int32(-1))
	if call.Err != nil {
		return fmt.Errorf("%s: %w", dbusNotify, call.Err)
	}
	return nil
}
