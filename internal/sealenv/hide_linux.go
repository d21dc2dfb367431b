package sealenv

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"kernel.org/pub/linux/libs/security/libcap/psx"
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
//   - as root, the capability bounding, ambient and inheritable sets of
//     every thread are emptied (dropCapabilities), so the commands it
//     starts, from whichever thread, run without capabilities (a root child
//     with CAP_SYS_PTRACE could read a non-dumpable parent).
//
// Each step is best effort: where the kernel refuses, the secrets are still
// kept out of the children's own environment and redacted from the ledger.
// The error (a hand-over that could not be read, capabilities that could
// not be dropped) is a warning: ralph goes on.
func Hide() error {
	handed, err := readSealed()
	if !handed {
		execWithoutSecrets() // returns only when there are none, or exec failed
	}
	const prSetDumpable = 4
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0) // cannot fail for 0
	if os.Geteuid() == 0 {
		if derr := dropCapabilities(); derr != nil {
			err = errors.Join(err, derr)
		}
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

// Linux prctl(2) and capget(2) constants.
const (
	prCapbsetRead       = 23
	prCapbsetDrop       = 24
	prCapAmbient        = 47
	prCapAmbientClear   = 4
	linuxCapabilityV3   = 0x20080522
	defaultLastCapValue = 40
)

// dropCapabilities empties the bounding set (what a command started by
// execve may gain), the ambient set and the inheritable set of every
// thread of the process, keeping its own effective and permitted
// capabilities. The sets are per thread and a command inherits those of
// the thread that forked it, so all threads change at once: each prctl
// and the capset run on every thread (psx.Syscall3 and Syscall6, which
// are syscall.AllThreadsSyscall and AllThreadsSyscall6 in a binary
// without cgo; with cgo, where Go refuses those with ENOTSUP, libpsx's,
// which signals each thread of /proc/self/task to make the call). Every
// thread gets the calling thread's effective and permitted sets, which
// all threads share until something changes one of them: Hide runs first.
func dropCapabilities() error {
	last := lastCap()
	for c := 0; c <= last; c++ {
		in, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prCapbsetRead, uintptr(c), 0)
		if e == syscall.EINVAL {
			break // a capability this kernel does not know: the set ends before it
		}
		if e == 0 && in == 0 {
			continue // not in this thread's set, so in none (they are all alike)
		}
		if _, _, e := psx.Syscall3(syscall.SYS_PRCTL, prCapbsetDrop, uintptr(c), 0); e != 0 {
			return fmt.Errorf("empty the capability bounding set (capability %d): %w; the commands ralph starts as root keep their capabilities", c, e)
		}
	}
	if _, _, e := psx.Syscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClear, 0, 0, 0, 0); e != 0 && e != syscall.EINVAL {
		// EINVAL: a kernel before 4.3 has no ambient set to clear.
		return fmt.Errorf("clear the ambient capabilities: %w; the commands ralph starts as root may keep them", e)
	}
	hdr := capHeader{version: linuxCapabilityV3}
	var data [2]capData
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("read the capabilities: %w; the commands ralph starts as root may inherit them", e)
	}
	data[0].inheritable, data[1].inheritable = 0, 0
	if _, _, e := psx.Syscall3(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("empty the inheritable capabilities: %w; the commands ralph starts as root may inherit them", e)
	}
	return nil
}

// capHeader and capData are capget(2)'s cap_user_header_t and, two of
// them for version 3, cap_user_data_t.
type capHeader struct {
	version uint32
	pid     int32
}

type capData struct{ effective, permitted, inheritable uint32 }

// lastCap is the highest capability the kernel knows.
func lastCap() int {
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	return defaultLastCapValue
}
