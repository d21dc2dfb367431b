package cli_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/fleet/fleettest"
	"github.com/ralphloop/ralph/internal/e2e"
)

// withCreds signs a fleet command in (§17): when args name with --nats a
// server fleettest started and carry no --creds, it adds the credentials of
// the member whose role fits the command: a worker's for worker, a
// submitter's for submit and attach (which may control the run), a
// viewer's for every reading command.
func withCreds(args []string) []string {
	url, hasCreds, hasCA := "", false, false
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--creds"):
			hasCreds = true
		case strings.HasPrefix(a, "--tls-ca"):
			hasCA = true
		case a == "--nats" && i+1 < len(args):
			url = args[i+1]
		}
	}
	if url == "" || len(args) == 0 {
		return args
	}
	out := append([]string(nil), args...)
	if ca, ok := fleettest.LookupCA(url); ok && !hasCA {
		out = append(out, "--tls-ca", ca)
	}
	if hasCreds {
		return out
	}
	role := fleet.RoleViewer
	switch args[0] {
	case "worker":
		role = fleet.RoleWorker
	case "submit", "attach":
		role = fleet.RoleSubmitter
	}
	if creds, ok := fleettest.LookupCreds(url, role); ok {
		out = append(out, "--creds", creds)
	}
	return out
}

// fleetCreds is the credentials file of role's member on the fleettest
// server(s) at url.
func fleetCreds(t *testing.T, url string, role fleet.Role) string {
	t.Helper()
	return fleettest.Creds(t, url, role)
}

// submitJob submits j to the fleet at url as its submitter, through the
// fleet's keeper, as `ralph submit` does.
func submitJob(t *testing.T, url string, j fleet.Job) error {
	t.Helper()
	nc, err := fleettest.Dial(url, fleet.RoleSubmitter)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return fleet.Submit(ctx, nc, fleettest.Signer(t, url, fleet.RoleSubmitter), j)
}

// The fleet lets in only its members, and each does only what its role
// allows (§17): the attacks of issue 22 that authentication answers.
var _ = suite.Add(e2e.Test{Name: "FleetAuthentication", Run: func(t *testing.T, e *e2e.E) {
	dir := filepath.Join(t.TempDir(), "fleet")
	serve, url := fleetServe(t, e, dir)
	creds := filepath.Join(dir, "creds")
	for _, r := range []string{"worker", "submitter", "viewer"} {
		fi, err := os.Stat(filepath.Join(creds, r+".creds"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s.creds: %v, %v; want a 0600 file", r, fi, err)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the fleet directory: %v, %v; want 0700", fi, err)
	}

	// No credentials: refused, and the sentence names the flag.
	_, stderr, code := e.Ralph("runs", "--nats", url).Run()
	if code != 2 || !strings.Contains(stderr, "lets in only the fleet's members; pass --creds FILE (or set RALPH_NATS_CREDS)") {
		t.Errorf("runs without --creds: exit %d, stderr %q", code, stderr)
	}
	// A file that holds no credentials: one sentence.
	junk := filepath.Join(t.TempDir(), "junk.creds")
	writeFile(t, junk, "not a seed\n")
	_, stderr, code = e.Ralph("runs", "--nats", url, "--creds", junk).Run()
	if code != 2 || !strings.Contains(stderr, junk+" holds no fleet credentials") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("runs with a junk --creds: exit %d, stderr %q", code, stderr)
	}
	// RALPH_NATS_CREDS signs in like --creds.
	out, stderr, code := e.Ralph("runs", "--nats", url).With("RALPH_NATS_CREDS=" + filepath.Join(creds, "viewer.creds")).Run()
	if code != 0 || !strings.HasPrefix(out, "RUN") {
		t.Errorf("runs with RALPH_NATS_CREDS: exit %d, stdout %q, stderr %q", code, out, stderr)
	}

	// A viewer cannot submit.
	cfg := filepath.Join(t.TempDir(), "ralph.toml")
	writeFile(t, cfg, "[model]\nprovider = \"static\"\n[plan]\nrtfs = '''(do (step \"x\" (call :ccos.echo {:message \"hi\"})))'''\n[[stop]]\nname = \"cap\"\nkind = \"max_iterations\"\nmax = 1\nclass = \"limit\"\n")
	_, stderr, code = e.Ralph("submit", cfg, "--nats", url, "--creds", filepath.Join(creds, "viewer.creds")).Run()
	if code != 2 || !strings.Contains(stderr, `Permissions Violation for Publish to "ralph.fleet.submit"`) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("a viewer's submit: exit %d, stderr %q; want it refused", code, stderr)
	}

	// Straight to NATS: what each role may not do is refused by the server.
	dial := func(role string) (*nats.Conn, chan error) {
		errs := make(chan error, 16)
		o, err := fleet.CredsOption(filepath.Join(creds, role+".creds"))
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(url, o, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
		if err != nil {
			t.Fatalf("connect as %s: %v", role, err)
		}
		t.Cleanup(nc.Close)
		return nc, errs
	}
	refused := func(who string, errs chan error, subject string) {
		t.Helper()
		select {
		case err := <-errs:
			if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), `"`+subject+`"`) {
				t.Errorf("%s: %v; want a permissions violation on %s", who, err, subject)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s was not refused", who)
		}
	}
	run := "01a20000-0000-7000-8000-000000000009"
	viewer, verrs := dial("viewer")
	viewer.Publish(fleet.CtlSubject(run), []byte("abort"))
	refused("a viewer's abort", verrs, fleet.CtlSubject(run))
	viewer.Publish(fleet.SubjectJobs, []byte("{}"))
	refused("a viewer's job", verrs, fleet.SubjectJobs)
	submitter, serrs := dial("submitter")
	submitter.Publish(fleet.ChainSubject(run), []byte("{}"))
	refused("a submitter's chain line", serrs, fleet.ChainSubject(run))
	// Only the keeper queues jobs and records them queued: a forged state
	// (issue 22: "succeeded … (forged)") is refused.
	submitter.Publish(fleet.SubjectJobs, []byte("{}"))
	refused("a submitter's job straight to the stream", serrs, fleet.SubjectJobs)
	submitter.Publish("$KV."+fleet.BucketRuns+"."+run, []byte(`{"state":"succeeded"}`))
	refused("a submitter's forged run state", serrs, "$KV."+fleet.BucketRuns+"."+run)
	if _, err := submitter.SubscribeSync(fleet.SubjectMembers); err != nil {
		t.Fatal(err)
	}
	refused("a submitter posing as the keeper", serrs, fleet.SubjectMembers)
	submitter.Publish("$KV."+fleet.BucketWorkers+".w1", []byte("{}"))
	refused("a submitter's worker state", serrs, "$KV."+fleet.BucketWorkers+".w1")
	submitter.Publish("$JS.API.STREAM.DELETE."+fleet.StreamChains, nil)
	refused("a submitter's stream delete", serrs, "$JS.API.STREAM.DELETE."+fleet.StreamChains)
	if _, err := submitter.SubscribeSync(fleet.CtlSubject(run)); err != nil {
		t.Fatal(err)
	}
	refused("a submitter serving controls", serrs, fleet.CtlSubject(run))

	// A member added while the server runs signs in; revoked, its
	// connection is closed at once and it cannot sign in again.
	out, stderr, code = e.Ralph("fleet", "creds", "add", "laptop", "--role", "viewer", "--dir", dir).Run()
	if code != 0 || !strings.Contains(out, filepath.Join(creds, "laptop.creds")+" (viewer") {
		t.Fatalf("creds add: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	laptopCreds := filepath.Join(t.TempDir(), "laptop.creds")
	writeFile(t, laptopCreds, string(mustRead(t, filepath.Join(creds, "laptop.creds"))))
	o, err := fleet.CredsOption(laptopCreds)
	if err != nil {
		t.Fatal(err)
	}
	var laptop *nats.Conn
	closed := make(chan struct{})
	waitUntil(t, "the new member signs in", func() bool {
		laptop, err = nats.Connect(url, o, nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
		return err == nil
	})
	if _, stderr, code := e.Ralph("fleet", "creds", "revoke", "laptop", "--dir", dir).Run(); code != 0 {
		t.Fatalf("creds revoke: exit %d, stderr %q", code, stderr)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Errorf("the revoked member's connection is still open (%v)", laptop.Status())
	}
	_, stderr, code = e.Ralph("runs", "--nats", url, "--creds", laptopCreds).Run()
	if code != 2 || !strings.Contains(stderr, "refused the credentials in "+laptopCreds) {
		t.Errorf("runs as a revoked member: exit %d, stderr %q", code, stderr)
	}
	_, stderr, code = e.Ralph("fleet", "creds", "add", "x", "--role", "admin", "--dir", dir).Run()
	if code != 2 || !strings.Contains(stderr, `"admin" is not a role; pass --role worker, submitter, viewer or keeper`) {
		t.Errorf("creds add --role admin: exit %d, stderr %q", code, stderr)
	}
	serve.Signal(syscall.SIGTERM)
	serve.Wait()
}})

// Listening beyond loopback needs TLS: one sentence with the fix.
var _ = suite.Add(e2e.Test{Name: "FleetServeNeedsTLSBeyondLoopback", Run: func(t *testing.T, e *e2e.E) {
	_, stderr, code := e.Ralph("fleet", "serve", "--listen", "0.0.0.0:0", "--dir", t.TempDir()).Run()
	if code != 2 || !strings.Contains(stderr, "--listen 0.0.0.0:0 is reachable from other machines, which needs TLS; pass --tls-cert FILE and --tls-key FILE") {
		t.Errorf("fleet serve on 0.0.0.0 without TLS: exit %d, stderr %q", code, stderr)
	}
}})

// A server with TLS: a client trusts it only with --tls-ca, and an expired
// or foreign certificate is one sentence with the fix, exit 2.
var _ = suite.Add(e2e.Test{Name: "FleetTLS", Run: func(t *testing.T, e *e2e.E) {
	good := fleettest.NewTLS(t, time.Time{}, time.Time{})
	other := fleettest.NewTLS(t, time.Time{}, time.Time{})
	expired := fleettest.NewTLS(t, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	for _, tc := range []struct {
		name   string
		server fleettest.TLSFiles
		ca     string
		code   int
		want   string
	}{
		{"trusted", good, good.CA, 0, ""},
		{"no --tls-ca", good, "", 2, "is not trusted"},
		{"another CA", good, other.CA, 2, "is not trusted"},
		{"expired", expired, expired.CA, 2, "has expired"},
	} {
		e.Run(tc.name, func(t *testing.T, e *e2e.E) {
			dir := filepath.Join(t.TempDir(), "fleet")
			serve := e.Ralph("fleet", "serve", "--listen", "127.0.0.1:0", "--dir", dir, "--tls-cert", tc.server.Cert, "--tls-key", tc.server.Key).Start()
			t.Cleanup(func() { serve.Signal(syscall.SIGTERM); serve.Wait() })
			var url string
			waitUntil(t, "fleet serve prints its URL", func() bool {
				_, rest, ok := strings.Cut(serve.Output(), "listening on ")
				url, _, _ = strings.Cut(rest, " ")
				return ok && strings.HasPrefix(url, "tls://")
			})
			args := []string{"runs", "--nats", url, "--creds", filepath.Join(dir, "creds", "viewer.creds")}
			if tc.ca != "" {
				args = append(args, "--tls-ca", tc.ca)
			}
			stdout, stderr, code := e.Ralph(args...).Run()
			if code != tc.code || !strings.Contains(stderr, tc.want) || (tc.code == 0 && !strings.HasPrefix(stdout, "RUN")) {
				t.Errorf("runs: exit %d, stdout %q, stderr %q; want %d and %q", code, stdout, stderr, tc.code, tc.want)
			}
			if tc.code != 0 && (!strings.Contains(stderr, "--tls-ca FILE") && !strings.Contains(stderr, "renew the server's --tls-cert") || strings.Count(strings.TrimSpace(stderr), "\n") != 0) {
				t.Errorf("runs: stderr %q; want one sentence with the fix", stderr)
			}
		})
	}
}})

// A fleet on a NATS server of your own (here one started without the
// keeper `ralph fleet serve` runs) has no keeper until `ralph fleet keeper`
// runs one: submit says so, then goes through it.
var _ = suite.Add(e2e.Test{Name: "FleetKeeperOnYourOwnServer", Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	dir, _ := fleettest.NewAuth(t)
	if _, err := fleet.AddMember(dir, "keeper", fleet.RoleKeeper); err != nil {
		t.Fatal(err)
	}
	ms, err := fleet.LoadMembers(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := fleet.StartServer(fleet.ServerOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0", Members: ms}) // no AuthDir: no keeper
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	url := srv.ClientURL()
	fleettest.Register(t, url, dir)
	cfg := filepath.Join(t.TempDir(), "ralph.toml")
	writeFile(t, cfg, "[model]\nprovider = \"static\"\n[plan]\nrtfs = '''(do (step \"x\" (call :ccos.echo {:message \"hi\"})))'''\n[[stop]]\nkind = \"max_iterations\"\nmax = 1\n")
	submitter := fleet.CredsPath(dir, string(fleet.RoleSubmitter))
	// Without the keeper the fleet has no streams: only the keeper makes
	// them (§17), when it starts.
	_, stderr, code := e.Ralph("submit", cfg, "--nats", url, "--creds", submitter).Run()
	if code != 2 || !strings.Contains(stderr, "has no streams yet: the fleet's keeper makes them when it starts") {
		t.Fatalf("submit without a keeper: exit %d, %q", code, stderr)
	}
	keeper := e.Ralph("fleet", "keeper", "--nats", url, "--creds", fleet.CredsPath(dir, "keeper"), "--dir", dir).Start()
	keeper.WaitLine("the fleet's keeper answers on " + url)
	stdout, stderr, code := e.Ralph("submit", cfg, "--nats", url, "--creds", submitter).Run()
	if code != 0 || len(strings.TrimSpace(stdout)) != 36 {
		t.Fatalf("submit through ralph fleet keeper: exit %d, %q %q", code, stdout, stderr)
	}
	// A worker's credentials cannot run the keeper: NATS refuses its
	// subscription to the keeper's subjects.
	_, stderr, code = e.Ralph("fleet", "keeper", "--nats", url, "--creds", fleet.CredsPath(dir, string(fleet.RoleWorker)), "--dir", dir).Run()
	if code != 2 || !strings.Contains(stderr, "ralph.fleet.") {
		t.Errorf("a keeper signed in as a worker: exit %d, %q", code, stderr)
	}
}})
