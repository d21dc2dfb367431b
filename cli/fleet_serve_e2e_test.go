package cli_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
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
)

// fleetServe starts `ralph fleet serve` on a free port with its streams in
// dir and returns the process and the URL it printed. The test stops it.
func fleetServe(t *testing.T, dir string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(ralphBin, "fleet", "serve", "--listen", "127.0.0.1:0", "--dir", dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	urlRe := regexp.MustCompile(`listening on (nats://\S+)`)
	var out []string
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("ralph fleet serve ended before printing its URL:\n%s\n%s", strings.Join(out, "\n"), stderr.String())
			}
			out = append(out, l)
			if m := urlRe.FindStringSubmatch(l); m != nil {
				go func() {
					for range lines { // drain the rest
					}
				}()
				return cmd, m[1]
			}
		case <-timeout:
			t.Fatalf("ralph fleet serve printed no URL in a minute:\n%s\n%s", strings.Join(out, "\n"), stderr.String())
		}
	}
}

func TestE2EFleetServe(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "fleet")
	cmd, url := fleetServe(t, dir)

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
	_, stderr, code := runBinary(t, ralphBin, "", "fleet", "serve", "--listen", addr, "--dir", t.TempDir())
	if code != 2 || !strings.Contains(stderr, "is in use") || !strings.Contains(stderr, "pass --listen") {
		t.Errorf("fleet serve on a taken port: exit %d, stderr %q; want 2 and the fix", code, stderr)
	}

	// A second server on the same directory would corrupt its streams.
	_, stderr, code = runBinary(t, ralphBin, "", "fleet", "serve", "--listen", "127.0.0.1:0", "--dir", dir)
	if code != 2 || !strings.Contains(stderr, "is in use by another `ralph fleet serve` (process "+strconv.Itoa(cmd.Process.Pid)+")") {
		t.Errorf("fleet serve on a directory in use: exit %d, stderr %q; want 2 naming the process", code, stderr)
	}

	// SIGTERM stops it cleanly; its streams are files in --dir.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("fleet serve after SIGTERM: %v; want exit 0", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); err != nil {
		t.Errorf("no JetStream files in --dir: %v", err)
	}
}

func TestE2EFleetServeBadListen(t *testing.T) {
	skipWithoutBinary(t)
	t.Parallel()
	_, stderr, code := runBinary(t, ralphBin, "", "fleet", "serve", "--listen", "localhost", "--dir", t.TempDir())
	if code != 2 || !strings.Contains(stderr, "host:port") {
		t.Errorf("fleet serve --listen localhost: exit %d, stderr %q; want 2 naming host:port", code, stderr)
	}
	// A port another program holds (here: this test).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, stderr, code = runBinary(t, ralphBin, "", "fleet", "serve", "--listen", l.Addr().String(), "--dir", t.TempDir())
	if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "is in use") {
		t.Errorf("fleet serve on a taken port: exit %d, stderr %q; want 2 and one sentence", code, stderr)
	}
}
