//go:build unix

package fleet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/ralphloop/ralph/internal/usage"
)

// lockDir takes the fleet directory dir for this process: two NATS
// servers writing one JetStream directory would corrupt its streams. The
// lock (an flock on dir/ralph-fleet.lock, holding the pid) ends with the
// process, however it ends; unlock releases it earlier.
func lockDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, "ralph-fleet.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, usage.Errorf("lock the fleet directory %s: %w; pass --dir DIR", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path) // only for the message: who holds it
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := ""
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf(" (process %d)", pid)
			}
			return nil, usage.Errorf("the fleet directory %s is in use by another `ralph fleet serve`%s; use that server, or pass --dir DIR for another fleet", dir, holder)
		}
		return nil, fmt.Errorf("lock the fleet directory %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0) // the pid only names the holder in messages
	}
	return func() { f.Close() }, nil
}
