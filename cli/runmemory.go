package cli

import (
	"os"
	"runtime/debug"
)

// runMemoryLimit is the Go heap a running loop aims to stay under. An
// agent that prints a flood makes garbage faster than the default pacer
// returns it (the heap would grow to twice what is live, Badger's
// memtable arena included); the soft limit keeps it near what is live.
// It is not a hard cap: the collector only works harder near it.
const runMemoryLimit = 64 << 20

// limitRunMemory sets runMemoryLimit unless GOMEMLIMIT says otherwise.
func limitRunMemory() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(runMemoryLimit)
	}
}
