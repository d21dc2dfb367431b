//go:build !linux

package ledger

// ReleaseMapped is a no-op where the process's mappings cannot be listed.
func (s *Store) ReleaseMapped() error { return nil }
