package sealenv

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// Hide keeps the model's key, and every secret-looking variable, away from
// the processes ralph starts (DESIGN §18):
//   - ralph runs again (execve, the same pid) without them in its initial
//     environment, which /proc/<pid>/environ shows for the life of the
//     process and os.Unsetenv does not change; they come back on an
//     inherited pipe into the environment Go keeps (os.Getenv), from which
//     shell.exec's children get no model key;
//   - the process is non-dumpable, so other processes of the user cannot
//     read its memory or environ through /proc;
//   - as root, its capability bounding set, ambient and inheritable sets
//     are emptied, so the commands it starts run without capabilities (a
//     root child with CAP_SYS_PTRACE could read a non-dumpable parent).
//
// Each step is best effort: where the kernel refuses, the secrets are still
// kept out of the children's own environment and redacted from the ledger.
// The error, a hand-over that could not be read, is a warning: ralph goes
// on without what it held.
func Hide() error {
	handed, err := readSealed()
	if !handed {
		execWithoutSecrets() // returns only when there are none, or exec failed
	}
	const prSetDumpable = 4
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
	if os.Geteuid() == 0 {
		dropCapabilities()
	}
	return err
}

// execWithoutSecrets runs this program again in this process with the
// secret variables moved from the environment to a pipe. It returns only
// when there is nothing to move, or the move failed (then ralph goes on
// with them in its environment, non-dumpable).
func execWithoutSecrets() {
	secret, rest := splitSecrets(os.Environ())
	r, ok, err := sealPipe(secret)
	if err != nil || !ok {
		return
	}
	fd := r.Fd()
	if _, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_SETFD, 0); e != 0 { // inherited across exec
		r.Close()
		return
	}
	env := append(rest, sealedFDEnv+"="+strconv.Itoa(int(fd)))
	err = syscall.Exec("/proc/self/exe", os.Args, env)
	// Only a failed exec returns: the process is unchanged.
	r.Close()
}

// dropCapabilities empties the bounding set (what a command started by
// execve may gain), the ambient set and the inheritable set, keeping this
// process's own effective capabilities.
func dropCapabilities() {
	const (
		prCapbsetDrop       = 24
		prCapAmbient        = 47
		prCapAmbientClear   = 4
		linuxCapabilityV3   = 0x20080522
		defaultLastCapValue = 40
	)
	last := defaultLastCapValue
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prCapbsetDrop, uintptr(c), 0)
	}
	_, _, _ = syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClear, 0, 0, 0, 0)
	hdr := struct {
		version uint32
		pid     int32
	}{version: linuxCapabilityV3}
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return
	}
	data[0].inheritable, data[1].inheritable = 0, 0
	_, _, _ = syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
}
