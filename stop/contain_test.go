package stop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/config"
	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/internal/proctest"
)

// A command condition whose command left its process group (setsid) and
// hangs is ended at the timeout with everything it started.
func TestCommandTimeoutKillsANewSession(t *testing.T) {
	t.Parallel()
	needShell(t)
	f := filepath.Join(t.TempDir(), "pid")
	script := fmt.Sprintf(`setsid /bin/sh -c 'echo $$ > %[1]s.tmp && mv %[1]s.tmp %[1]s && exec sleep 300' & wait`, f)
	c := mustCond(t, config.Stop{Name: "hung", Kind: "command", Cmd: []string{"sh", "-c", script}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan outcome, 1)
	go func() { done <- c.check.check(ctx, &Input{}) }()
	var pid int
	eventually.True(t, "the command's child starting", func() bool {
		if b, err := os.ReadFile(f); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return pid != 0
	})
	cancel()
	if o := <-done; o.met || o.detail != "cancelled" {
		t.Errorf("cancelled command: %+v", o)
	}
	proctest.WaitGone(t, pid)
}
