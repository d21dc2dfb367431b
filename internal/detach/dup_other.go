//go:build !linux

package detach

import "syscall"

// dupOnto makes fd a copy of from.
func dupOnto(from, fd int) error { return syscall.Dup2(from, fd) }
