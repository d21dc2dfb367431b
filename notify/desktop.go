package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/ralphloop/ralph/config"
)

// desktop sends freedesktop notifications
// (org.freedesktop.Notifications.Notify) on the session bus that
// DBUS_SESSION_BUS_ADDRESS names.
type desktop struct {
	address string
	timeout time.Duration
}

func newDesktop(n *config.Notify, o *Options) (Sender, error) {
	return &desktop{address: o.Env("DBUS_SESSION_BUS_ADDRESS"), timeout: n.Timeout.Duration}, nil
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
