package fleet

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// watched is a member's connection whose permission violations are
// collected: NATS refuses a publish or a subscription a role does not
// allow by dropping it and saying so apart.
type watched struct {
	*nats.Conn
	errs chan error
}

func watch(t *testing.T, url string, role Role) watched {
	t.Helper()
	errs := make(chan error, 64)
	nc, err := connectAs(url, role, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return watched{nc, errs}
}

// refused publishes on subject (pub) or subscribes to it, and waits for
// NATS to refuse it.
func (w watched) refused(t *testing.T, what, subject string, pub bool) {
	t.Helper()
	if pub {
		if err := w.Publish(subject, []byte("forged")); err != nil {
			t.Fatal(err)
		}
	} else if _, err := w.Subscribe(subject, func(*nats.Msg) { t.Errorf("%s: a message arrived on %s", what, subject) }); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case err := <-w.errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+subject+`"`) {
				return
			}
		case <-timeout:
			t.Errorf("%s: NATS let it through (%s)", what, subject)
			return
		}
	}
}

// The holes of issue 37 item 1, each tried on one server with the roles'
// credentials: a forged job delivered to a worker's inbox, a job the keeper
// did not sign, a frame injected into another member's tunnel, and a
// signed control replayed on another worker after the run moved.
func TestFleetRefusesForgedDeliveriesFramesAndReplays(t *testing.T) {
	fx := newFleetFixture(t)
	nc, h := fx.connect()
	workerKey := signerOf(t, nc, RoleWorker).Key()
	submitterKey := signerOf(t, nc, RoleSubmitter).Key()
	viewer := watch(t, fx.url, RoleViewer)
	submitter := watch(t, fx.url, RoleSubmitter)

	// No member but the JetStream server delivers to a worker's inbox, and
	// no one listens on another's inboxes or tunnels.
	viewer.refused(t, "a viewer delivering a job to a worker's fetch inbox", InboxPrefix(workerKey)+".fetch1", true)
	viewer.refused(t, "a viewer publishing on the shared inbox space", "_INBOX.x", true)
	viewer.refused(t, "a viewer listening on every inbox", "_INBOX.>", false)
	viewer.refused(t, "a viewer listening on a worker's inboxes", InboxPrefix(workerKey)+".>", false)
	submitter.refused(t, "a submitter delivering a job to a worker's fetch inbox", InboxPrefix(workerKey)+".fetch2", true)
	viewer.refused(t, "a viewer injecting a frame into a submitter's tunnel", subjectTunnelUp+submitterKey+".0123", true)
	viewer.refused(t, "a viewer reading a submitter's tunnel", subjectTunnelDown+submitterKey+".>", false)
	viewer.refused(t, "a viewer sending a worker's end of a tunnel", subjectTunnelDown+submitterKey+".0123", true)

	// Jobs on the queue that the keeper did not sign (published in its
	// place, or signed by another key) run nothing and touch no run state.
	ctx := ctxT(t)
	kh := keeperHandles(t, nc)
	forged := func(sig string) string {
		id := uuid.Must(uuid.NewV7()).String()
		data, _ := json.Marshal(Job{RunID: id, Config: "[model]\nprovider = \"static\"\n", Submitted: time.Now().UTC(), SubmittedBy: "submitter"})
		m := &nats.Msg{Subject: SubjectJobs, Data: data, Header: nats.Header{}}
		if sig != "" {
			m.Header.Set(HeaderJobSig, sig)
		}
		if _, err := kh.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
		return id
	}
	other, _ := nkeys.CreateAccount()
	otherSig, _ := other.Sign([]byte("anything"))
	ids := []string{forged(""), forged(base64.RawURLEncoding.EncodeToString(otherSig))}
	stop := fx.worker("w1", 1, 3*time.Second, nc, h)
	waitFor(t, "the worker to remove the forged jobs", func() bool { return jobsQueued(t, h) == 0 })
	for _, id := range ids {
		if _, found, err := GetState(ctx, h.Runs, id); err != nil || found {
			t.Errorf("a forged job for run %s left a state (found %v, %v)", id, found, err)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// A signed control taken on one worker is refused on every other, also
	// once the run has moved there.
	runID := uuid.Must(uuid.NewV7()).String()
	ncB, hB := fx.connect()
	msg := &nats.Msg{Subject: CtlSubject(runID), Data: []byte(OpPause)}
	if err := signerOf(t, nc, RoleSubmitter).Sign(msg); err != nil {
		t.Fatal(err)
	}
	first, second := &recControls{}, &recControls{}
	stopA, err := ServeControls(nc, runID, first, ControlOptions{Owner: "submitter", Nonces: h.Nonces})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := submitter.RequestMsgWithContext(ctx, msg); err != nil || string(r.Data) != "ok" {
		t.Fatalf("the first pause: %v %q", err, replyOf(r))
	}
	stopA()
	stopB, err := ServeControls(ncB, runID, second, ControlOptions{Owner: "submitter", Nonces: hB.Nonces})
	if err != nil {
		t.Fatal(err)
	}
	defer stopB()
	again := &nats.Msg{Subject: msg.Subject, Data: msg.Data, Header: msg.Header}
	r, err := submitter.RequestMsgWithContext(ctx, again)
	if err != nil || !strings.Contains(string(r.Data), "received before (a replay)") {
		t.Errorf("the pause replayed on another worker: %v %q", err, replyOf(r))
	}
	if got := second.records(); got != "" {
		t.Errorf("the replayed pause was recorded on the second worker: %q", got)
	}
}

func replyOf(m *nats.Msg) string {
	if m == nil {
		return ""
	}
	return string(m.Data)
}

// waitFor polls cond until it holds, failing the test after 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waited 30s for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stolen member credentials cannot rewrite the fleet (issue 37 item 3):
// no member may create, update, purge or delete a stream or bucket or
// delete a message, the chain stream itself denies deleting and purging
// its messages, and only the keeper's configuration stands.
func TestMembersCannotChangeOrWipeTheFleetsStreams(t *testing.T) {
	t.Parallel()
	nc, h := netFleet(t)
	url := nc.ConnectedUrl()
	for _, role := range []Role{RoleWorker, RoleSubmitter, RoleViewer} {
		m := watch(t, url, role)
		for _, s := range []string{StreamChains, StreamJobs, kvStream(BucketRuns), kvStream(BucketWorkers), kvStream(BucketNonces)} {
			for _, op := range []string{"CREATE", "UPDATE", "PURGE", "DELETE"} {
				m.refused(t, string(role)+" "+op+" "+s, "$JS.API.STREAM."+op+"."+s, true)
			}
			m.refused(t, string(role)+" deleting a message of "+s, "$JS.API.STREAM.MSG.DELETE."+s, true)
		}
	}
	info, err := h.Chains.Info(netCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if c := info.Config; !c.DenyDelete || !c.DenyPurge {
		t.Errorf("stream %s allows deleting (%v) or purging (%v) its messages", StreamChains, !c.DenyDelete, !c.DenyPurge)
	}
}
