package cli_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/fleet/fleettest"
	"github.com/ralphloop/ralph/internal/e2e"
	"github.com/ralphloop/ralph/ledger"
)

// gitIn runs git in dir for a test, with an identity of its own.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// submitRepo is a bare repository (the shared remote) and a clone of it
// to commit from.
type submitRepo struct {
	bare, work string
}

func newSubmitRepo(t *testing.T, files map[string]string) submitRepo {
	t.Helper()
	root := t.TempDir()
	r := submitRepo{bare: filepath.Join(root, "remote.git"), work: filepath.Join(root, "work")}
	gitIn(t, root, "init", "--quiet", "--bare", "--initial-branch=main", r.bare)
	gitIn(t, root, "clone", "--quiet", r.bare, r.work)
	r.commit(t, files)
	return r
}

func (r submitRepo) commit(t *testing.T, files map[string]string) string {
	t.Helper()
	for name, text := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(r.work, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(r.work, name), text)
	}
	gitIn(t, r.work, "add", "-A")
	gitIn(t, r.work, "commit", "--quiet", "--allow-empty", "-m", "files")
	gitIn(t, r.work, "push", "--quiet", "origin", "HEAD:main")
	return gitIn(t, r.work, "rev-parse", "HEAD")
}

const submitConfig = `[intent]
goal = "say hello"
prompt_file = "PROMPT.md"

[model]
provider = "static"

[plan]
file = "plan.rtfs"

[[stop]]
kind = "max_iterations"
max = 2

[governance]
allow = ["ccos.*"]
`

// fleetJobs is what the fleet at url holds: its queued jobs and run states.
type fleetJobs struct {
	t  *testing.T
	js jetstream.JetStream
	h  *fleet.Handles
}

func openFleetJobs(t *testing.T, url string) fleetJobs {
	t.Helper()
	nc, err := fleettest.Dial(url, fleet.RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := fleet.Ensure(ctx, js, fleet.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return fleetJobs{t: t, js: js, h: h}
}

// certified is the certificate a worker of the fleet gets for st's key:
// what lets the fleet's readers accept the segments it replicates.
func (f fleetJobs) certified(ctx context.Context, st *ledger.Store) fleet.ReplicateOption {
	f.t.Helper()
	nc := f.js.Conn()
	c, err := fleet.Certify(ctx, nc, fleettest.Signer(f.t, nc.ConnectedUrl(), fleet.RoleWorker), st.VerifierKeyString())
	if err != nil {
		f.t.Fatal(err)
	}
	return fleet.WithCertificate(c)
}

// jobs returns every queued job, in order.
func (f fleetJobs) jobs() []fleet.Job {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := f.h.Jobs.Info(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	var jobs []fleet.Job
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := f.h.Jobs.GetMsg(ctx, seq)
		if err != nil {
			continue // a gap: acked and removed
		}
		j, err := fleet.ParseJob(m.Data)
		if err != nil {
			f.t.Fatalf("job %d: %v", seq, err)
		}
		jobs = append(jobs, j)
	}
	return jobs
}

var _ = suite.Add(e2e.Test{Name: "Submit", Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	url := fleettest.Node(t).ClientURL()
	fj := openFleetJobs(t, url)
	repo := newSubmitRepo(t, map[string]string{
		"ralph.toml": submitConfig,
		"plan.rtfs":  `(do (step "Hi" (call :ccos.echo {:message "hi"})))`,
		"PROMPT.md":  "say hello\n",
	})
	cfg := filepath.Join(repo.work, "ralph.toml")
	sha := gitIn(t, repo.work, "rev-parse", "HEAD")

	stdout, stderr, code := e.Ralph("submit", cfg, "--nats", url, "--workspace", repo.bare+"@main").Run()
	if code != 0 {
		t.Fatalf("submit: exit %d, stderr %q", code, stderr)
	}
	id := strings.TrimSuffix(stdout, "\n")
	if u, err := uuid.Parse(id); err != nil || u.Version() != 7 || stdout != id+"\n" {
		t.Fatalf("submit printed %q; want a UUID v7 alone on a line", stdout)
	}
	if !strings.Contains(stderr, "queued run "+id) {
		t.Errorf("submit's hint on stderr: %q", stderr)
	}
	jobs := fj.jobs()
	if len(jobs) != 1 {
		t.Fatalf("%d jobs queued; want 1", len(jobs))
	}
	j := jobs[0]
	want := fleet.Job{RunID: id, Config: submitConfig, ConfigPath: "ralph.toml", Workspace: repo.bare, Ref: sha}
	if j.RunID != want.RunID || j.Config != want.Config || j.ConfigPath != want.ConfigPath || j.Workspace != want.Workspace || j.Ref != want.Ref {
		t.Errorf("queued job %+v; want %+v", j, want)
	}
	st, found, err := fleet.GetState(context.Background(), fj.h.Runs, id)
	if err != nil || !found || st.State != fleet.StateQueued {
		t.Errorf("run state %+v (found %v, %v); want queued", st, found, err)
	}

	// RALPH_NATS names the fleet when --nats does not; a config in a
	// directory of its repository is read from the same place in the clone.
	repo.commit(t, map[string]string{"sub/ralph.toml": strings.Replace(submitConfig, `"plan.rtfs"`, `"../plan.rtfs"`, 1), "sub/PROMPT.md": "hi\n"})
	out, errOut, code := e.Ralph("submit", filepath.Join(repo.work, "sub", "ralph.toml"), "--workspace", repo.bare).
		With("RALPH_NATS="+url, "RALPH_NATS_CREDS="+fleetCreds(t, url, fleet.RoleSubmitter)).Run()
	if code != 0 {
		t.Fatalf("submit with RALPH_NATS: exit %d, %s", code, errOut)
	}
	jobs = fj.jobs()
	if len(jobs) != 2 || jobs[1].RunID != strings.TrimSpace(out) || jobs[1].ConfigPath != "sub/ralph.toml" {
		t.Errorf("jobs after the second submit: %+v", jobs)
	}
}})

var _ = suite.Add(e2e.Test{Name: "SubmitRefused", Needs: []e2e.Need{e2e.Tool("git")}, Run: func(t *testing.T, e *e2e.E) {
	url := fleettest.Node(t).ClientURL()
	fj := openFleetJobs(t, url)
	repo := newSubmitRepo(t, map[string]string{
		"ralph.toml": submitConfig,
		"plan.rtfs":  `(do (step "Hi" (call :ccos.echo {:message "hi"})))`,
	})
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, text)
		return p
	}
	inline := write("inline.toml", `[model]
provider = "static"

[plan]
rtfs = '(do (step "Hi" (call :ccos.echo {:message "hi"})))'

[[stop]]
kind = "max_iterations"
max = 1
`)
	tests := []struct {
		name string
		args []string
		want *regexp.Regexp
	}{
		{"a file missing from the workspace", []string{filepath.Join(repo.work, "ralph.toml"), "--workspace", repo.bare + "@main"},
			regexp.MustCompile(`ralph\.toml:3: intent\.prompt_file PROMPT\.md is not in the run's workspace: workspace .*remote\.git at main has no PROMPT\.md; commit and push it there`)},
		{"a file without a workspace", []string{filepath.Join(repo.work, "ralph.toml")},
			regexp.MustCompile(`ralph\.toml:3: .*without --workspace the run starts in an empty directory.*pass --workspace`)},
		{"a ref the workspace lacks", []string{inline, "--workspace", repo.bare + "@no-such-branch"},
			regexp.MustCompile(`cannot fetch ref no-such-branch of workspace .*remote\.git .*check the URL and the branch`)},
		{"a workspace that does not exist", []string{inline, "--workspace", filepath.Join(dir, "nowhere.git")},
			regexp.MustCompile(`cannot fetch HEAD of workspace .*nowhere\.git`)},
		{"a credential in the workspace URL", []string{inline, "--workspace", "https://me:s3cret@git.example.com/p.git"},
			regexp.MustCompile(`carries a credential.*credential helper`)},
		{"a config that does not parse", []string{write("bad.toml", "[model]\nprovider = \n")},
			regexp.MustCompile(`bad\.toml:2:\d+: `)},
		{"a bad stop condition", []string{write("stop.toml", strings.Replace(string(mustRead(t, inline)), "max = 1", "max = 0", 1))},
			regexp.MustCompile(`stop\.toml:\d+: .*max_iterations.*positive`)},
		{"a plan governance refuses", []string{write("gov.toml", string(mustRead(t, inline))+"\n[governance]\nallow = [\"kv.*\"]\n")},
			regexp.MustCompile(`governance refuses the static plan.*ccos\.echo`)},
		{"a plan that does not read", []string{write("unread.toml", strings.Replace(string(mustRead(t, inline)), `"hi"})))'`, `"hi"}))'`, 1))},
			regexp.MustCompile(`never closed`)},
		{"no NATS server", []string{inline, "--nats", "nats://127.0.0.1:1"},
			regexp.MustCompile("^ralph: no NATS server answers at nats://127\\.0\\.0\\.1:1; start one with `ralph fleet serve` or pass --nats URL\n$")},
	}
	tmp := t.TempDir() // the submits' TMPDIR: the workspace copies go there and must go away
	env := "TMPDIR=" + tmp
	for _, tc := range tests {
		e.Run(tc.name, func(t *testing.T, e *e2e.E) {
			args := append([]string{"submit"}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "--nats") {
				args = append(args, "--nats", url)
			}
			stdout, stderr, code := e.Ralph(args...).With(env).Run()
			if code != 2 || stdout != "" || !tc.want.MatchString(stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing on stdout, and %s", code, stdout, stderr, tc.want)
			}
		})
	}
	if jobs := fj.jobs(); len(jobs) != 0 {
		t.Errorf("refused submits queued %d jobs", len(jobs))
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("refused submits left %d temporary files or directories behind", len(left))
	}
}})

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// On a NATS cluster the keeper makes the fleet's streams and buckets with
// three replicas, so losing a server loses nothing, and a submit queues
// its job there.
var _ = suite.Add(e2e.Test{Name: "SubmitToCluster", Run: func(t *testing.T, e *e2e.E) {
	c := fleettest.NewCluster(t, 3)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ralph.toml")
	writeFile(t, cfg, `[model]
provider = "static"

[plan]
rtfs = '(do (step "Hi" (call :ccos.echo {:message "hi"})))'

[[stop]]
kind = "max_iterations"
max = 1
`)
	stdout, stderr, code := "", "", -1
	// A cluster may still be settling its leaders: a submit that could not
	// reach JetStream queued nothing and can be repeated.
	for try := 0; try < 10 && code != 0; try++ {
		stdout, stderr, code = e.Ralph("submit", cfg, "--nats", c.URL()).Run()
		if code != 0 {
			time.Sleep(500 * time.Millisecond)
		}
	}
	if code != 0 {
		t.Fatalf("submit to a cluster: exit %d, %q", code, stderr)
	}
	nc, err := fleettest.Dial(c.URL(), fleet.RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{fleet.StreamJobs, fleet.StreamChains, "KV_" + fleet.BucketRuns, "KV_" + fleet.BucketWorkers} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if r := s.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("stream %s has %d replicas; want 3", name, r)
		}
	}
	st, found, err := fleet.GetState(ctx, mustKV(t, js, fleet.BucketRuns), strings.TrimSpace(stdout))
	if err != nil || !found || st.State != fleet.StateQueued {
		t.Errorf("the submitted run's state: %+v %v %v", st, found, err)
	}
}})

func mustKV(t *testing.T, js jetstream.JetStream, bucket string) jetstream.KeyValue {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}
