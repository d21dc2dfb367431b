package procgroup

import "syscall"

func setParentDeath(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

// onMainThread reports whether the calling goroutine runs on the
// process's main thread (its locked thread, when it called
// runtime.LockOSThread).
func onMainThread() bool { return syscall.Gettid() == syscall.Getpid() }
