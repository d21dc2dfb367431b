package conformance

// Which process opened each connection a mock model served: ralph (whose
// sandbox proxy dials the model for the CLI it confines) or the CLI
// itself. A run under the sandbox `ralph init` writes must reach the mock
// only through the proxy: every connection the mock accepted during the
// run was opened by the ralph binary, none by the CLI. The socket's owner
// is read from /proc (the connection's client port in /proc/net/tcp, its
// inode among the processes' open files), so the check holds for HTTP
// CONNECT tunnels and plain proxied requests alike, and for a CLI that
// ignored the proxy (whose connection Landlock refuses: then there is
// none).

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// mockServer is a mock model on 127.0.0.1 that notes the program of the
// process behind each connection it accepts.
type mockServer struct {
	*httptest.Server
	mu    sync.Mutex
	conns []string // the executable that opened each connection ("?" when not found)
}

// mocks are the mock servers each test started, for ralph to check after
// a sandboxed run.
var mocks sync.Map // *testing.T → []*mockServer

// serveMock serves h on 127.0.0.1 until t ends.
func serveMock(t *testing.T, h http.Handler) *mockServer {
	t.Helper()
	m := &mockServer{}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		exe := connOwner(c)
		m.mu.Lock()
		m.conns = append(m.conns, exe)
		m.mu.Unlock()
		return ctx
	}
	srv.Start()
	m.Server = srv
	t.Cleanup(srv.Close)
	list, _ := mocks.Load(t)
	ms, _ := list.([]*mockServer)
	mocks.Store(t, append(ms, m))
	t.Cleanup(func() { mocks.Delete(t) })
	return m
}

// accepted is the programs behind the connections accepted so far.
func (m *mockServer) accepted() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.conns...)
}

// connCounts is how many connections each of t's mocks has accepted.
func connCounts(t *testing.T) []int {
	list, _ := mocks.Load(t)
	ms, _ := list.([]*mockServer)
	n := make([]int, len(ms))
	for i, m := range ms {
		n[i] = len(m.accepted())
	}
	return n
}

// checkProxied fails t unless every connection t's mocks accepted since
// before (connCounts) was opened by the ralph binary; it returns how many
// there were.
func checkProxied(t *testing.T, before []int) int {
	t.Helper()
	list, _ := mocks.Load(t)
	ms, _ := list.([]*mockServer)
	total := 0
	for i, m := range ms {
		from := 0
		if i < len(before) {
			from = before[i]
		}
		for _, exe := range m.accepted()[from:] {
			total++
			if exe != ralphBin {
				t.Errorf("the mock model at %s was reached by %s, not through ralph's sandbox proxy", m.URL, exe)
			}
		}
	}
	return total
}

// connOwner is the executable of the process that holds the client end
// of c, a connection accepted on loopback; "?" when none is found.
func connOwner(c net.Conn) string {
	client, ok1 := c.RemoteAddr().(*net.TCPAddr)
	server, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return "?"
	}
	inode := socketInode(client.Port, server.Port)
	if inode == "" {
		return "?"
	}
	want := "socket:[" + inode + "]"
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			if l, _ := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); l == want {
				exe, err := os.Readlink(filepath.Join("/proc", p.Name(), "exe"))
				if err != nil {
					return "?"
				}
				return exe
			}
		}
	}
	return "?"
}

// socketInode is the inode of the TCP socket whose local port is local
// and remote port remote, from /proc/net/tcp and tcp6 ("" when none).
func socketInode(local, remote int) string {
	suffix := func(port int) string { return fmt.Sprintf(":%04X", port) }
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) > 9 && strings.HasSuffix(fs[1], suffix(local)) && strings.HasSuffix(fs[2], suffix(remote)) {
				f.Close()
				return fs[9]
			}
		}
		f.Close()
	}
	return ""
}

// TestConnOwner: a connection this test process opens to a mock is
// found to be this test binary's.
func TestConnOwner(t *testing.T) {
	m := serveMock(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	resp, err := http.Get(m.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got := m.accepted(); len(got) != 1 || got[0] != self {
		t.Errorf("the mock saw connections from %q, want one from %s", got, self)
	}
}
