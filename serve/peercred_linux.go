package serve

import (
	"net"
	"os"
	"strconv"
	"syscall"

	"github.com/ralphloop/ralph/internal/procgroup"
)

// peerCred is the uid and pid of the process at the other end of c
// (SO_PEERCRED: as they were when it connected; the pid as this process's
// pid namespace sees it, 0 when it cannot). uid is -1 when c is no unix
// socket.
func peerCred(c net.Conn) (uid, pid int, err error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, 0, nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if credErr != nil {
		return 0, 0, credErr
	}
	return int(cred.Uid), int(cred.Pid), nil
}

// sandboxedPeer is Options.RefuseRunPeers' refusal: a peer that is a
// process this ralph started (the run's agent, its commands, anything
// they started, wherever they went: procgroup.Descendant); one whose pid
// cannot be known (0: from a pid namespace this process cannot see
// into); or one gone by the time it is accepted (it may have handed the
// connection to a child of its own and exited, out of the check's reach).
func sandboxedPeer(pid int) bool {
	if pid <= 0 {
		return true
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
		return true
	}
	return procgroup.Descendant(pid)
}
