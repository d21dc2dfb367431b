package notify

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/ralphloop/ralph/internal/testenv"
)

// notifications stands for the desktop's notification daemon on a real,
// private session bus: it owns org.freedesktop.Notifications and keeps
// what Notify was called with.
type notifications struct {
	mu    sync.Mutex
	calls []notifyCall
}

type notifyCall struct {
	app, summary, body string
	hints              map[string]dbus.Variant
	timeout            int32
}

func (n *notifications) Notify(app string, replaces uint32, icon, summary, body string, actions []string,
	hints map[string]dbus.Variant, timeout int32) (uint32, *dbus.Error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = append(n.calls, notifyCall{app, summary, body, hints, timeout})
	return uint32(len(n.calls)), nil
}

// privateBus starts dbus-daemon --session on a socket of the test's own
// and returns its address.
func privateBus(t *testing.T) string {
	t.Helper()
	testenv.Tool(t, "dbus-daemon") // apt-get install dbus
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "dbus-daemon", "--session", "--nofork", "--print-address=1",
		"--address=unix:dir="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon printed no address: %v", err)
	}
	return strings.TrimSpace(line)
}

// The desktop sink calls org.freedesktop.Notifications.Notify on the
// session bus, critical when a person must act.
func TestDesktopOverDBus(t *testing.T) {
	t.Parallel()
	addr := privateBus(t)
	srv, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	daemon := &notifications{}
	if err := srv.Export(daemon, dbusPath, "org.freedesktop.Notifications"); err != nil {
		t.Fatal(err)
	}
	if reply, err := srv.RequestName(dbusName, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own %s: %v %v", dbusName, reply, err)
	}
	d := &desktop{address: addr, timeout: 5 * time.Second}
	e := Event{Event: RunEnded, State: "failed", Class: "failure", Text: "ralph: run r failed after 2 iteration(s)"}
	if err := d.Send(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if err := d.Send(context.Background(), Event{Event: Budget, Percent: 80, Text: "ralph: run r has spent 80%"}); err != nil {
		t.Fatal(err)
	}
	daemon.mu.Lock()
	defer daemon.mu.Unlock()
	if len(daemon.calls) != 2 {
		t.Fatalf("%d calls", len(daemon.calls))
	}
	c := daemon.calls[0]
	if c.app != "ralph" || c.summary != "ralph: run failed" || c.body != e.Text || c.timeout != -1 || c.hints["urgency"].Value() != byte(2) {
		t.Errorf("call %+v", c)
	}
	if c := daemon.calls[1]; c.summary != "ralph: 80% of the budget spent" || c.hints["urgency"].Value() != byte(1) {
		t.Errorf("call %+v", c)
	}
}

// With no session bus the sink fails with the reason, and no bus, no
// notification daemon on the bus, are one sentence each.
func TestDesktopWithoutBus(t *testing.T) {
	t.Parallel()
	err := (&desktop{timeout: time.Second}).Send(context.Background(), Event{Event: RunEnded})
	if err == nil || !strings.Contains(err.Error(), "DBUS_SESSION_BUS_ADDRESS is not set") {
		t.Fatalf("got %v", err)
	}
	err = (&desktop{address: privateBus(t), timeout: 5 * time.Second}).Send(context.Background(), Event{Event: RunEnded})
	if err == nil || !strings.Contains(err.Error(), "org.freedesktop.Notifications.Notify: ") {
		t.Fatalf("got %v", err)
	}
}
