package sandbox

import (
	"fmt"
	"os"
	"sync"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// landlockABI is the kernel's Landlock ABI version (0: none), read once.
var landlockABI = sync.OnceValue(func() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
})

// fsRights are the filesystem rights the ABI knows: all of them are
// handled, so whatever no rule grants is refused.
func fsRights(abi int) uint64 {
	switch {
	case abi >= 9:
		return 1<<17 - 1 // + resolving pathname unix sockets
	case abi >= 5:
		return 1<<16 - 1 // + ioctl on devices
	case abi >= 3:
		return 1<<15 - 1 // + truncate
	case abi == 2:
		return 1<<14 - 1 // + refer (links and renames across directories)
	case abi == 1:
		return 1<<13 - 1
	}
	return 0
}

// fileRights are the rights a rule on a file (not a directory) may hold.
const fileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev

func (a access) rights(abi int) uint64 {
	switch a {
	case readExec:
		return ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	case device:
		return (ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSReadDir | ll.AccessFSIoctlDev |
			ll.AccessFSTruncate | ll.AccessFSMakeReg | ll.AccessFSRemoveFile | ll.AccessFSMakeDir | ll.AccessFSRemoveDir) & fsRights(abi)
	}
	return fsRights(abi)
}

func landlockUsable(net Network) error {
	abi := landlockABI()
	if abi < 1 {
		return fmt.Errorf("the kernel has no Landlock (Linux 5.13 or later with lsm=landlock)")
	}
	if net != NetAll && abi < 4 {
		return fmt.Errorf("Landlock ABI %d cannot confine TCP (ABI 4, Linux 6.7)", abi)
	}
	return nil
}

func landlockNetUsable() error { return landlockUsable(NetModel) }

// ruleset is what a Landlock domain is made from, prepared before the
// forking thread applies it (confine): paths to open, ports to allow.
type ruleset struct {
	abi   int
	fs    bool     // handle the filesystem (not under bwrap: it must mount)
	rules []rule   // with fs
	tcp   bool     // handle TCP connect and bind
	ports []uint16 // with tcp: connect allowed
}

// confine restricts the calling thread (locked, never given back to the
// runtime) and what it forks next: no new privileges, then the ruleset
// with landlock_restrict_self on this thread only.
func (r ruleset) confine() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	if r.fs {
		if err := dropCapabilities(); err != nil {
			return err
		}
	}
	attr := ll.RulesetAttr{}
	if r.fs {
		attr.HandledAccessFS = fsRights(r.abi)
	}
	if r.tcp {
		attr.HandledAccessNet = ll.AccessNetBindTCP | ll.AccessNetConnectTCP
	}
	if r.abi >= 6 {
		attr.Scoped = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
	}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("sandbox: landlock ruleset: %w", err)
	}
	defer unix.Close(fd)
	if r.fs {
		for _, rl := range r.rules {
			if rl.link != "" {
				continue // its target is a rule of its own
			}
			if err := addPathRule(fd, rl, r.abi); err != nil {
				return err
			}
		}
	}
	for _, p := range r.ports {
		if err := ll.LandlockAddNetPortRule(fd, &ll.NetPortAttr{AllowedAccess: ll.AccessNetConnectTCP, Port: uint64(p)}, 0); err != nil {
			return fmt.Errorf("sandbox: landlock rule for port %d: %w", p, err)
		}
	}
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		return fmt.Errorf("sandbox: landlock_restrict_self: %w", err)
	}
	return nil
}

func addPathRule(fd int, rl rule, abi int) error {
	pfd, err := unix.Open(rl.path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if os.IsNotExist(err) {
			return nil // gone since the view was made (a device, a system tree)
		}
		return fmt.Errorf("sandbox: open %s for its landlock rule: %w", rl.path, err)
	}
	defer unix.Close(pfd)
	rights := rl.access.rights(abi)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return fmt.Errorf("sandbox: stat %s: %w", rl.path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		rights &= fileRights
	}
	if err := ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{AllowedAccess: rights, ParentFd: pfd}, 0); err != nil {
		return fmt.Errorf("sandbox: landlock rule for %s: %w", rl.path, err)
	}
	return nil
}

// dropCapabilities empties this thread's capability bounding, ambient
// and inheritable sets, so that a command it starts as root runs without
// capabilities: Landlock refuses a confined process attaching to ralph
// (/proc/PID/mem) but not reading it (/proc/PID/environ, maps), which a
// non-dumpable ralph refuses only to a process without CAP_SYS_PTRACE.
// Not under bwrap, which needs its capabilities as root and drops them
// for what it runs. A user who is not root has none to drop.
func dropCapabilities() error {
	if unix.Geteuid() != 0 {
		return nil
	}
	last := 63
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		fmt.Sscan(string(b), &last)
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("sandbox: drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("sandbox: clear the ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("sandbox: read the capabilities: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("sandbox: clear the inheritable capabilities: %w", err)
	}
	return nil
}
