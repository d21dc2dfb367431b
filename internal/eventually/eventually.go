// Package eventually is the one wait of ralph's tests: it polls a
// condition until it holds. Its bound only guards against a hang (two
// minutes, for a loaded machine); no test measures time with it.
package eventually

import (
	"testing"
	"time"
)

const (
	// Bound is how long a condition may take before the wait gives up.
	Bound    = 2 * time.Minute
	interval = 20 * time.Millisecond
)

// Poll calls cond until it holds, and reports whether it did within Bound.
func Poll(cond func() bool) bool {
	for deadline := time.Now().Add(Bound); !cond(); time.Sleep(interval) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// True waits until cond holds, and fails t saying what never happened.
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Poll(cond) {
		t.Fatalf("%s never happened", what)
	}
}

// NoError calls fn until it returns nil, and fails t with what and fn's
// last error if it never does.
func NoError(t testing.TB, what string, fn func() error) {
	t.Helper()
	var err error
	if !Poll(func() bool { err = fn(); return err == nil }) {
		t.Fatalf("%s: %v", what, err)
	}
}
