//go:build !unix

package ledger

import "os"

// StaleLock cannot tell a dead process from a live one here: it returns 0.
func StaleLock(string) int { return 0 }

// lockShared opens the data directory; this platform has no flock, so
// Badger's own lock is all that keeps a writer out.
func lockShared(dataPath string) (*os.File, error) { return os.Open(dataPath) }

// processAlive cannot tell here: a pid is taken to be alive.
func processAlive(int) bool { return true }
