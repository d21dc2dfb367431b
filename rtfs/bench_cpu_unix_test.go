//go:build unix

package rtfs

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) this process has used: on
// a loaded machine it measures the work a benchmark did, where wall time
// also counts waiting for a core.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
