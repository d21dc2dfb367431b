package fleet

import "testing"

func TestJobQueuedNote(t *testing.T) {
	t.Parallel()
	j := Job{RunID: "01a2", Workspace: "/src/repo.git", Ref: "0123456789abcdef0123"}
	want := "queued run 01a2 on nats://h:4222 (works in /src/repo.git at 0123456789ab, on branch ralph/01a2); `ralph runs --nats nats://h:4222 --creds c.creds` lists it, `ralph attach --nats nats://h:4222 --creds c.creds 01a2` follows it once a worker takes it"
	if got := j.QueuedNote("nats://h:4222", "c.creds"); got != want {
		t.Fatalf("note:\n%s\nwant\n%s", got, want)
	}
	j.Ref = ""
	if got := j.QueuedNote("u", ""); got != "queued run 01a2 on u (works in /src/repo.git at its HEAD, on branch ralph/01a2); `ralph runs --nats u` lists it, `ralph attach --nats u 01a2` follows it once a worker takes it" {
		t.Fatalf("note without creds or ref: %s", got)
	}
	if got := (Job{RunID: "x"}).QueuedNote("u", ""); got != "queued run x on u (works in an empty directory); `ralph runs --nats u` lists it, `ralph attach --nats u x` follows it once a worker takes it" {
		t.Fatalf("note without a workspace: %s", got)
	}
}
