package fleet

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// netFleet starts an embedded JetStream node with the fleet's streams and
// buckets, and connects to it.
func netFleet(t testing.TB) (*nats.Conn, *Handles) {
	t.Helper()
	srv, err := startTestServer(ServerOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := connectAs(srv.ClientURL(), RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Ensure(netCtx(t), js, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return nc, h
}

func netCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func netJob(t testing.TB) Job {
	return Job{RunID: uuid.Must(uuid.NewV7()).String(), Config: "goal = \"x\"\n", ConfigPath: "ralph.toml",
		Workspace: "file:///tmp/repo.git", Ref: "main"}
}

func jobsQueued(t testing.TB, h *Handles) uint64 {
	t.Helper()
	info, err := h.Jobs.Info(netCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestSubmitQueuesAJobAndItsState(t *testing.T) {
	t.Parallel()
	_, h := netFleet(t)
	ctx := netCtx(t)
	j := netJob(t)
	if err := submitJob(ctx, t, h, j); err != nil {
		t.Fatal(err)
	}
	msg, err := h.Jobs.GetLastMsgForSubject(ctx, SubjectJobs)
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.Header.Get(jetstream.MsgIDHeader); got != j.RunID {
		t.Errorf("job message id %q, want the run id %s", got, j.RunID)
	}
	got, err := ParseJob(msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	if got.RunID != j.RunID || got.Config != j.Config || got.Workspace != j.Workspace || got.Ref != j.Ref || got.Submitted.IsZero() {
		t.Errorf("queued job %+v, want %+v with a submit time", got, j)
	}
	s, found, err := GetState(ctx, h.Runs, j.RunID)
	if err != nil || !found {
		t.Fatalf("state of the submitted run: %v, found %v", err, found)
	}
	if s.State != StateQueued || !s.Submitted.Equal(got.Submitted) || s.Workspace != j.Workspace {
		t.Errorf("state %+v, want queued at %v", s, got.Submitted)
	}
}

// A retried submit is never a second job: not after a full submit, not
// after one that published but failed before the state, and it never
// turns a started run back to queued.
func TestSubmitIsSafeToRetry(t *testing.T) {
	t.Parallel()
	_, h := netFleet(t)
	ctx := netCtx(t)

	j := netJob(t)
	for range 3 {
		if err := submitJob(ctx, t, h, j); err != nil {
			t.Fatal(err)
		}
	}
	if n := jobsQueued(t, h); n != 1 {
		t.Errorf("three submits of one run queued %d jobs, want 1", n)
	}

	// Published, then the submitter died before the state was written.
	k := netJob(t)
	k.Submitted = time.Now().UTC()
	data, _ := json.Marshal(k)
	if _, err := keeperHandles(t, h.JS.Conn()).JS.Publish(ctx, SubjectJobs, data, jetstream.WithMsgID(k.RunID)); err != nil {
		t.Fatal(err)
	}
	if err := submitJob(ctx, t, h, k); err != nil {
		t.Fatal(err)
	}
	if n := jobsQueued(t, h); n != 2 {
		t.Errorf("a retry after a bare publish left %d jobs, want 2", n)
	}

	// A worker started the run before the retry.
	if err := PutState(ctx, h.Runs, RunState{RunID: j.RunID, State: StateRunning, Worker: "w1", Deliveries: 1}); err != nil {
		t.Fatal(err)
	}
	if err := submitJob(ctx, t, h, j); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := GetState(ctx, h.Runs, j.RunID); s.State != StateRunning {
		t.Errorf("a retried submit turned a running run into %q", s.State)
	}
	if n := jobsQueued(t, h); n != 2 {
		t.Errorf("a retried submit of a running run left %d jobs, want 2", n)
	}
}

func TestSubmitRefusesABadJob(t *testing.T) {
	t.Parallel()
	_, h := netFleet(t)
	j := netJob(t)
	j.Config = " \n"
	err := submitJob(netCtx(t), t, h, j)
	if err == nil || !strings.Contains(err.Error(), "empty config") {
		t.Fatalf("submit of an empty config: %v", err)
	}
	if n := jobsQueued(t, h); n != 0 {
		t.Errorf("a refused job was queued (%d jobs)", n)
	}
}

func TestJobValidate(t *testing.T) {
	t.Parallel()
	ok := Job{RunID: "0190a0b2-7c3e-7def-8abc-0123456789ab", Config: "goal = \"x\"\n"}
	cases := []struct {
		name string
		edit func(*Job)
		want string // "" = valid
	}{
		{"valid", func(*Job) {}, ""},
		{"valid with path", func(j *Job) { j.ConfigPath = "conf/ralph.toml" }, ""},
		{"no run id", func(j *Job) { j.RunID = "" }, "has no run id"},
		{"run id not a uuid", func(j *Job) { j.RunID = "run-1" }, "is not a UUID"},
		{"run id in braces", func(j *Job) { j.RunID = "{0190a0b2-7c3e-7def-8abc-0123456789ab}" }, "is not a UUID"},
		{"empty config", func(j *Job) { j.Config = "" }, "empty config"},
		{"absolute config path", func(j *Job) { j.ConfigPath = "/etc/ralph.toml" }, "inside the workspace"},
		{"escaping config path", func(j *Job) { j.ConfigPath = "../ralph.toml" }, "inside the workspace"},
		{"unclean config path", func(j *Job) { j.ConfigPath = "a//ralph.toml" }, "inside the workspace"},
		{"ref as an option", func(j *Job) { j.Ref = "--upload-pack=x" }, "read as an option"},
		{"newline in workspace", func(j *Job) { j.Workspace = "a\nb" }, "single lines"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := ok
			c.edit(&j)
			err := j.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("valid job refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v, want an error saying %q", err, c.want)
			case err != nil && strings.Count(strings.TrimSuffix(err.Error(), "."), ". ") > 0:
				t.Errorf("error is more than one sentence: %v", err)
			}
		})
	}
}

func FuzzParseJob(f *testing.F) {
	f.Add([]byte(`{"run_id":"0190a0b2-7c3e-7def-8abc-0123456789ab","config":"goal = 1","config_path":"ralph.toml","workspace":"","ref":"","submitted":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"run_id":"x"}`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(`{"nope":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := ParseJob(data)
		if err == nil {
			if verr := j.Validate(); verr != nil {
				t.Fatalf("ParseJob accepted an invalid job: %v", verr)
			}
		} else if err.Error() == "" {
			t.Fatal("an empty error")
		}
	})
}
