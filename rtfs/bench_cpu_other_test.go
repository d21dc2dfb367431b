//go:build !unix

package rtfs

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
