//go:build !linux

package procgroup

// Descendant cannot read another process's parent or cgroup here: it
// reports false for every pid.
func Descendant(pid int) bool { return false }
