package cli_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/internal/e2e"
)

// fleetServe starts `ralph fleet serve` on a free port with its streams in
// dir and returns the process and the URL it printed. The test stops it.
func fleetServe(t *testing.T, e *e2e.E, dir string) (*e2e.Proc, string) {
	t.Helper()
	serve := e.Ralph("fleet", "serve", "--listen", "127.0.0.1:0", "--dir", dir).Start()
	m := regexp.MustCompile(`listening on (nats://\S+)`).FindStringSubmatch(serve.WaitLine("listening on nats://"))
	if m == nil {
		t.Fatalf("ralph fleet serve printed no URL:\n%s", serve.Output())
	}
	return serve, m[1]
}

var _ = suite.Add(e2e.Test{Name: "FleetServe", Run: func(t *testing.T, e *e2e.E) {
	dir := filepath.Join(t.TempDir(), "fleet")
	serve, url := fleetServe(t, e, dir)

	viewer, err := fleet.CredsOption(filepath.Join(dir, "creds", "viewer.creds"))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, viewer)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range []string{fleet.StreamJobs, fleet.StreamChains} {
		if _, err := js.Stream(ctx, s); err != nil {
			t.Errorf("stream %s: %v", s, err)
		}
	}
	for _, b := range []string{fleet.BucketRuns, fleet.BucketWorkers} {
		if _, err := js.KeyValue(ctx, b); err != nil {
			t.Errorf("bucket %s: %v", b, err)
		}
	}
	nc.Close()

	// A second server on the same address: one sentence with the fix.
	addr := strings.TrimPrefix(url, "nats://")
	_, stderr, code := e.Ralph("fleet", "serve", "--listen", addr, "--dir", t.TempDir()).Run()
	if code != 2 || !strings.Contains(stderr, "is in use") || !strings.Contains(stderr, "pass --listen") {
		t.Errorf("fleet serve on a taken port: exit %d, stderr %q; want 2 and the fix", code, stderr)
	}

	// A second server on the same directory would corrupt its streams.
	_, stderr, code = e.Ralph("fleet", "serve", "--listen", "127.0.0.1:0", "--dir", dir).Run()
	if code != 2 || !strings.Contains(stderr, "is in use by another `ralph fleet serve` (process "+strconv.Itoa(serve.Pid())+")") {
		t.Errorf("fleet serve on a directory in use: exit %d, stderr %q; want 2 naming the process", code, stderr)
	}

	// SIGTERM stops it cleanly; its streams are files in --dir.
	if err := serve.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := serve.Wait(); err != nil {
		t.Errorf("fleet serve after SIGTERM: %v; want exit 0", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); err != nil {
		t.Errorf("no JetStream files in --dir: %v", err)
	}
}})

var _ = suite.Add(e2e.Test{Name: "FleetServeBadListen", Run: func(t *testing.T, e *e2e.E) {
	_, stderr, code := e.Ralph("fleet", "serve", "--listen", "localhost", "--dir", t.TempDir()).Run()
	if code != 2 || !strings.Contains(stderr, "host:port") {
		t.Errorf("fleet serve --listen localhost: exit %d, stderr %q; want 2 naming host:port", code, stderr)
	}
	// A port another program holds (here: this test).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, stderr, code = e.Ralph("fleet", "serve", "--listen", l.Addr().String(), "--dir", t.TempDir()).Run()
	if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "is in use") {
		t.Errorf("fleet serve on a taken port: exit %d, stderr %q; want 2 and one sentence", code, stderr)
	}
}})
