package serve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// SocketName is the socket's file name inside the store directory.
const SocketName = "ralph.sock"

// maxSocketPath is the longest path a sockaddr_un holds on Linux (108
// bytes with the terminating NUL); macOS allows 104, so stay under both.
const maxSocketPath = 103

// SocketPath is where the process holding the store at dir serves it:
// dir/ralph.sock, or, when that path is too long for a unix socket, a
// name derived from the store's absolute path under $XDG_RUNTIME_DIR/ralph
// (else the temporary directory's ralph-UID).
func SocketPath(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = filepath.Clean(dir)
	}
	p := filepath.Join(abs, SocketName)
	if len(p) <= maxSocketPath {
		return p
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(runtimeDir(), hex.EncodeToString(sum[:12])+".sock")
}

// runtimeDir is the directory for sockets whose store path is too long.
func runtimeDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "ralph")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("ralph-%d", os.Getuid()))
}

// PermissionError says a directory the socket lives in lets another user
// in; its message names the fix.
type PermissionError struct{ Msg string }

func (e *PermissionError) Error() string { return e.Msg }

// checkDir makes sure dir, where the socket goes, is the user's own and
// closed to others. One another user can write to could have its socket
// replaced: that is an error naming the fix. One others can only read and
// enter is served (the socket itself is 0600 and checks its peer), with a
// warning naming the fix.
func checkDir(dir string, create bool) (warning string, err error) {
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", fmt.Errorf("create socket directory %s: %w", dir, err)
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("socket directory: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return "", &PermissionError{fmt.Sprintf("%s belongs to uid %d, not to you (uid %d); use a store of your own with --store DIR", dir, st.Uid, os.Getuid())}
	}
	perm := fi.Mode().Perm()
	switch {
	case perm&0o022 != 0:
		return "", &PermissionError{fmt.Sprintf("%s has mode %04o, writable by other users, who could replace its socket; run `chmod 700 %s` and start again", dir, perm, dir)}
	case perm&0o077 != 0:
		return fmt.Sprintf("%s has mode %04o, readable by other users; run `chmod 700 %s` to keep the record to yourself", dir, perm, dir), nil
	}
	return "", nil
}

// listen opens the socket at path, mode 0600. A socket file left by a
// process that is gone (nothing answers) is removed first; one that
// answers belongs to a live server and is an error. refuse, when set,
// says which peers (by pid) are turned away besides other users'.
func listen(path string, refuse func(pid int) bool) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket; remove it and start again", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("another process already serves this store on %s", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove the stale socket %s: %w", path, err)
		}
	}
	// The umask applies while bind creates the file: make it owner-only
	// from the start rather than chmod after (a window where others could
	// connect).
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("serve the store on %s: %w", path, err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil { // the umask already did it; make sure
		l.Close()
		return nil, fmt.Errorf("serve the store on %s: %w", path, err)
	}
	return &peerListener{Listener: l, uid: os.Getuid(), refuse: refuse}, nil
}

// peerListener closes connections from another user before any byte is
// read (the socket's mode already keeps them out; this holds if it is
// loosened), and those refuse turns away.
type peerListener struct {
	net.Listener
	uid    int
	refuse func(pid int) bool
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, pid, err := peerCred(c)
		if err == nil && (uid < 0 || uid == l.uid) && (l.refuse == nil || !l.refuse(pid)) {
			return &peerConn{Conn: c, pid: pid}, nil
		}
		c.Close() // another user, a refused peer, or credentials that cannot be read
	}
}

// peerConn is an accepted connection with its peer's pid (0 where the
// system does not say), which the server puts in each request's context
// (peerPID).
type peerConn struct {
	net.Conn
	pid int
}

type peerPIDKey struct{}

// peerPID is the pid of the process at the other end of the request's
// connection; 0 when unknown.
func peerPID(ctx context.Context) int {
	pid, _ := ctx.Value(peerPIDKey{}).(int)
	return pid
}
