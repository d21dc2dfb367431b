package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/internal/procgroup"
)

// runPeerChild is the child of TestRunPeersAreRefused: it asks the
// socket for /v1/info and prints what it was answered.
func runPeerChild(path string) {
	conn, err := net.Dial("unix", path)
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(0)
	}
	fmt.Fprint(conn, "GET /v1/info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(conn)
	fmt.Printf("answer:%q\n", b)
	os.Exit(0)
}

// askFromChild starts this test binary as a process of the run would be
// started (procgroup.Start), directly or escaped (setsid and a double
// fork, its parent gone), and returns what the socket answered it.
func askFromChild(t *testing.T, path string, escape bool) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "answer")
	// The leader stays until killed: the run's agent is alive while what
	// it started asks.
	script := `"$0" -test.run='^TestRunPeersAreRefused$' >"$1" 2>&1; sleep 60`
	if escape {
		script = `setsid sh -c 'sh -c "\"\$0\" -test.run=^TestRunPeersAreRefused\$ >\"\$1\" 2>&1" "$0" "$1" &' "$0" "$1"; sleep 60`
	}
	cmd := exec.Command("sh", "-c", script, os.Args[0], out)
	cmd.Env = append(os.Environ(), "SERVE_RUN_PEER="+path)
	p, err := procgroup.Start(cmd, procgroup.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	var b []byte
	if !eventually.Poll(func() bool {
		b, _ = os.ReadFile(out)
		return bytes.HasSuffix(b, []byte("\n"))
	}) {
		t.Fatalf("the child (escaped: %v) never said what it was answered: %q", escape, b)
	}
	return string(b)
}

// TestRunPeersAreRefused: with RefuseRunPeers, a process ralph started
// (and one that left its session and parent) is closed unanswered, while
// ralph's own connection is served; without it, the same child is
// answered, so the refusal is the option's.
func TestRunPeersAreRefused(t *testing.T) {
	if path := os.Getenv("SERVE_RUN_PEER"); path != "" {
		runPeerChild(path)
	}
	for _, refuse := range []bool{false, true} {
		st := openStore(t)
		s, c := start(t, Options{Store: st, RefuseRunPeers: refuse})
		if c.Info().PID != os.Getpid() {
			t.Fatalf("ralph's own connection was not served: %+v", c.Info())
		}
		for _, escape := range []bool{false, true} {
			got := askFromChild(t, s.Path(), escape)
			answered := strings.Contains(got, "200 OK")
			if answered == refuse {
				t.Errorf("RefuseRunPeers=%v, escaped=%v: the child got %s", refuse, escape, got)
			}
		}
		if _, err := Dial(context.Background(), st.Dir()); err != nil {
			t.Errorf("RefuseRunPeers=%v: ralph's own dial failed: %v", refuse, err)
		}
	}
}
