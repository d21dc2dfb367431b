package detach

import (
	"fmt"
	"os"
	"path/filepath"
)

// LogPath is where a run's output goes when no terminal shows it:
// <store>/logs/<run-id>.log.
func LogPath(storeDir, runID string) string {
	return filepath.Join(storeDir, "logs", runID+".log")
}

// RedirectOutput points this process's stdout and stderr (the file
// descriptors, so every writer holding os.Stdout follows) at the run's log
// file, appending. It is how a run goes on without its terminal.
func RedirectOutput(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create the log directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open the run's log: %w", err)
	}
	defer f.Close()
	for _, fd := range []int{1, 2} {
		if err := dupOnto(int(f.Fd()), fd); err != nil {
			return fmt.Errorf("send output to %s: %w", path, err)
		}
	}
	return nil
}
