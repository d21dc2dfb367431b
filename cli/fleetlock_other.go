//go:build !unix

package cli

// lockFleetDir does nothing where flock is not available: run one
// `ralph fleet serve` per directory there.
func lockFleetDir(string) (func(), error) { return func() {}, nil }
