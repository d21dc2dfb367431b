//go:build !unix

package fleet

// lockDir does nothing where flock is not available: run one
// `ralph fleet serve` per directory there.
func lockDir(string) (func(), error) { return func() {}, nil }
