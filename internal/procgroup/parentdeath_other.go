//go:build !linux

package procgroup

import "syscall"

// setParentDeath does nothing where the kernel has no parent-death signal;
// the group kill on every way out of Start's callers still applies.
func setParentDeath(*syscall.SysProcAttr) {}

// onMainThread: elsewhere Confine restricts nothing a thread carries.
func onMainThread() bool { return false }
