package fleet

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// publishGarbage puts one message that is no chain line on run id's chain
// subject, as anyone who can publish there could.
func publishGarbage(t *testing.T, h *Handles, id string) uint64 {
	t.Helper()
	ack, err := h.JS.Publish(ctxT(t), ChainSubject(id), []byte(`{"forged":true}`))
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// forgeEndedSegment publishes a forger's segment on run id's chain: its own
// key (certified with the credentials of certifiedAs, when given), one
// forged shell.exec action, an end line.
func forgeEndedSegment(t *testing.T, h *Handles, id string, certifiedAs ...Role) *ledger.Store {
	t.Helper()
	st, err := ledger.Open(ledger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Append(ctxT(t), &ledger.Action{RunID: id, ActionID: id + "-forged", Type: ledger.CapabilityCall,
		FunctionName: "shell.exec", Success: true, Arguments: []rtfs.Value{rtfs.String("id")}, Timestamp: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	var opts []ReplicateOption
	for _, role := range certifiedAs {
		cert, err := Certify(ctxT(t), h.JS.Conn(), signerOf(t, h.JS.Conn(), role), st.VerifierKeyString())
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, WithCertificate(cert))
	}
	r, err := Replicate(ctxT(t), h.JS, st, id, 1, 0, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.End(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return st
}

// One garbage message on a running run's chain subject is skipped: the
// worker that runs it goes on after it (its next line is not fenced by
// it), the run ends as it would have, its state reports the message, and
// the chain still verifies.
func TestGarbageOnTheChainIsSkipped(t *testing.T) {
	fx := newFleetFixture(t)
	_, h := fx.connect()
	ncA, hA := fx.connect()
	release := fx.holdWorker("A")
	fx.worker("A", 1, 30*time.Second, ncA, hA)
	id := fx.submit(h, limitJob(3))
	<-fx.holding // A/1, in its last step
	garbage := publishGarbage(t, h, id)
	release()
	s := waitState(t, h, id, "final state", func(s RunState) bool { return Final(s.State) })
	if s.State != StateLimit || s.Iteration != 3 || s.Worker != "A" {
		t.Fatalf("state %+v, want limit after 3 iterations on A", s)
	}
	if s.ChainSkipped != 1 || !strings.Contains(s.ChainNote, "is not a line of its chain; skipped") {
		t.Errorf("the run's state does not report the garbage: %d %q", s.ChainSkipped, s.ChainNote)
	}
	acts, info := streamChain(t, h, id)
	if !info.Ended || countType(acts, ledger.IterationCompleted) != 3 {
		t.Fatalf("%d iterations completed on the stream, ended %v", countType(acts, ledger.IterationCompleted), info.Ended)
	}
	want := "a message in the stream of run " + id + " (message " + u64(garbage) + " of stream RALPH_CHAINS): it is not a chain line"
	if info.Skipped != 1 || !strings.HasPrefix(info.SkipNotes[0], want) {
		t.Errorf("the reader skipped %d: %q, want %q", info.Skipped, info.SkipNotes, want)
	}
	fx.checkRun(h, id, 3)
}

// A garbage message on the chain subject of a run no worker holds (handed
// back) does not keep the next worker from rebuilding the run: it is
// skipped, noted on the run's state, and the run completes.
func TestRebuildSkipsGarbage(t *testing.T) {
	fx := newFleetFixture(t)
	_, h := fx.connect()
	ncA, hA := fx.connect()
	release := fx.holdWorker("A")
	stopA := fx.worker("A", 1, 30*time.Second, ncA, hA)
	id := fx.submit(h, limitJob(3))
	<-fx.holding // A/1
	stopped := make(chan error, 1)
	go func() { stopped <- stopA() }()
	// A's stop asks the run to pause; the held call then ends, and A hands
	// the run back after iteration 1.
	eventually.True(t, "A asking the run to pause", func() bool { return fx.pauseRequested(id) })
	release()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	waitState(t, h, id, "handed back", func(s RunState) bool { return s.State == StateHandedBack })
	publishGarbage(t, h, id)
	publishGarbage(t, h, id)
	ncB, hB := fx.connect()
	fx.worker("B", 1, 30*time.Second, ncB, hB)
	s := waitState(t, h, id, "final state", func(s RunState) bool { return Final(s.State) })
	if s.State != StateLimit || s.Iteration != 3 || s.Worker != "B" {
		t.Fatalf("state %+v, want limit after 3 iterations on B", s)
	}
	if s.ChainSkipped != 2 || !strings.Contains(s.ChainNote, "it is not a chain line") {
		t.Errorf("the run's state does not report the garbage: %d %q", s.ChainSkipped, s.ChainNote)
	}
	fx.checkRun(h, id, 3)
}

// A segment under a key the fleet key did not certify (issue 22's forged
// segment: another store's key, a forged shell.exec, an end line) is
// skipped by the rebuilding worker, which runs the run from what its own
// workers wrote; the run's state and readers name the key and the fleet
// key.
func TestUncertifiedSegmentIsSkipped(t *testing.T) {
	fx := newFleetFixture(t)
	_, h := fx.connect()
	id := fx.submit(h, limitJob(3))
	st := forgeEndedSegment(t, h, id)
	roster, err := FetchRoster(ctxT(t), h.JS.Conn())
	if err != nil {
		t.Fatal(err)
	}
	ncB, hB := fx.connect()
	fx.worker("B", 1, 30*time.Second, ncB, hB)
	s := waitState(t, h, id, "final state", func(s RunState) bool { return Final(s.State) })
	if s.State != StateLimit || s.Iteration != 3 {
		t.Fatalf("state %+v, want limit after 3 iterations", s)
	}
	want := "key line of the segment from action 1 in the stream of run " + id + " (message 1 of stream RALPH_CHAINS): key " +
		shortKey(st.VerifierKeyString()) + " is not certified by fleet key " + shortKey(roster.FleetKey) + " (its key line carries no certificate)"
	if !strings.HasPrefix(s.ChainNote, want) {
		t.Errorf("the run's state notes %q, want %q", s.ChainNote, want)
	}
	_, info, err := VerifyChain(ctxT(t), h.JS, id, nil, WithFleetKey(roster.FleetKey))
	if err != nil {
		t.Fatal(err)
	}
	if info.Uncertified != 1 || !strings.HasPrefix(info.UncertifiedNote, want) {
		t.Errorf("the reader left out %d uncertified segments: %q", info.Uncertified, info.UncertifiedNote)
	}
	for _, k := range info.Keys {
		if k == st.VerifierKeyString() {
			t.Errorf("the forger's key %s is among the chain's keys %v", k, info.Keys)
		}
	}
}

// A chain that has its end line (here a forged segment: another store's
// actions and an end line, with no action closing the run) ends the run:
// the next worker does not resume it, publishes nothing after the end,
// and records why on the run's state.
func TestForgedEndIsFinal(t *testing.T) {
	fx := newFleetFixture(t)
	_, h := fx.connect()
	id := fx.submit(h, limitJob(3))
	// The forger's segment, certified with a worker's credentials: what a
	// compromised worker could do.
	forgeEndedSegment(t, h, id, RoleWorker)
	last, err := h.Chains.GetLastMsgForSubject(ctxT(t), ChainSubject(id))
	if err != nil {
		t.Fatal(err)
	}
	ncB, hB := fx.connect()
	fx.worker("B", 1, 30*time.Second, ncB, hB)
	s := waitState(t, h, id, "final state", func(s RunState) bool { return Final(s.State) })
	want := "the run's chain in stream RALPH_CHAINS has its end line after action 1 but no closing action: the run ended there and is not resumed"
	if s.State != StateFailed || s.Error != want {
		t.Fatalf("state %+v, want failed with %q", s, want)
	}
	if now, err := h.Chains.GetLastMsgForSubject(ctxT(t), ChainSubject(id)); err != nil || now.Sequence != last.Sequence {
		t.Errorf("a worker published after the chain's end line: last message %d, was %d (%v)", now.Sequence, last.Sequence, err)
	}
	waitNoPending(t, h)
	// Whatever is published after the end line is skipped by readers.
	m := nats.NewMsg(ChainSubject(id))
	m.Data = []byte("key ralph/x")
	m.Header.Set(jetstream.MsgIDHeader, MsgID(id, "other", ledger.BundleKey, 2))
	m.Header.Set(HeaderSeq, "2")
	m.Header.Set(HeaderFrom, "2")
	if _, err := h.JS.PublishMsg(ctxT(t), m); err != nil {
		t.Fatal(err)
	}
	_, info := streamChain(t, h, id)
	if !info.Ended || info.Actions != 1 || info.Skipped != 1 || !strings.Contains(info.SkipNotes[0], "it follows the chain's end line; skipped") {
		t.Errorf("after the end line: %+v", info)
	}
}

// A segment under a key that is not pinned is refused naming its line of
// the bundle, the stream message it came from and the key, never "the
// bundle reader stopped".
func TestPinnedRefusalNamesTheLine(t *testing.T) {
	fx := newFleetFixture(t)
	_, h := fx.connect()
	id := "pinned"
	a, err := ledger.Open(ledger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i := range 3 {
		if _, err := a.Append(ctxT(t), &ledger.Action{RunID: id, ActionID: id + "-" + u64(uint64(i)), Type: ledger.CapabilityCall,
			FunctionName: "test.charge", Success: true, Timestamp: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	ra, err := Replicate(ctxT(t), h.JS, a, id, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := ra.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// The forger imports the chain under its own key and adds one action.
	b, info, err := RebuildStore(ctxT(t), h.JS, id, ledger.Options{InMemory: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rb, err := Replicate(ctxT(t), h.JS, b, id, info.Actions+1, info.LastStreamSeq)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctxT(t), &ledger.Action{RunID: id, ActionID: id + "-forged", Type: ledger.CapabilityCall,
		FunctionName: "shell.exec", Success: true, Timestamp: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := rb.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	_, _, err = VerifyChain(ctxT(t), h.JS, id, []string{a.VerifierKeyString()})
	// Lines: 1 header, 2 key, 3–8 each action and its checkpoint, 9 the forger's key.
	want := "the chain of run pinned in stream RALPH_CHAINS does not verify: line 9 (key line of the segment from action 4, message 8 of the stream): " +
		"the checkpoints after this line are signed by key " + b.VerifierKeyString() + ", not by the pinned key " + a.VerifierKeyString()
	if err == nil || err.Error() != want {
		t.Fatalf("verify with the first key pinned: %v\nwant %s", err, want)
	}
	if _, _, err := VerifyChain(ctxT(t), h.JS, id, []string{a.VerifierKeyString(), b.VerifierKeyString()}); err != nil {
		t.Fatalf("verify with both keys pinned: %v", err)
	}
}

func u64(n uint64) string { return strconv.FormatUint(n, 10) }

// A message another client publishes under the id of a replicator's next
// line is not taken for that line: the replicator skips it, the stream
// refuses the line as its duplicate, and replication stops with why (the
// worker hands the run back). The next store's segment drops it, and the
// chain verifies.
func TestReplicateRefusesAStolenLineID(t *testing.T) {
	fx := newFleetFixture(t)
	_, h := fx.connect()
	id := "stolen"
	st, err := ledger.Open(ledger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := Replicate(ctxT(t), h.JS, st, id, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(ChainSubject(id))
	m.Data = []byte("a AAAA")
	m.Header.Set(jetstream.MsgIDHeader, MsgID(id, st.ID(), ledger.BundleAct, 1))
	m.Header.Set(HeaderSeq, "1")
	if _, err := h.JS.PublishMsg(ctxT(t), m); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctxT(t), &ledger.Action{RunID: id, ActionID: id + "-1", Type: ledger.CapabilityCall,
		FunctionName: "test.charge", Success: true, Timestamp: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	err = r.Flush(ctxT(t))
	want := "carries the id of line " + MsgID(id, st.ID(), ledger.BundleAct, 1) + " but not its bytes"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("flush after a stolen line id: %v, want %q", err, want)
	}
	if n, note := r.Skipped(); n != 1 || !strings.Contains(note, "is not a line of its chain") {
		t.Errorf("the replicator skipped %d: %q", n, note)
	}
	r.Close(ctxT(t))
	b, info, err := RebuildStore(ctxT(t), h.JS, id, ledger.Options{InMemory: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Append(ctxT(t), &ledger.Action{RunID: id, ActionID: id + "-1b", Type: ledger.CapabilityCall,
		FunctionName: "test.charge", Success: true, Timestamp: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	rb, err := Replicate(ctxT(t), h.JS, b, id, info.Actions+1, info.LastStreamSeq)
	if err != nil {
		t.Fatal(err)
	}
	if err := rb.End(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	rep, vinfo, err := VerifyChain(ctxT(t), h.JS, id, []string{st.VerifierKeyString(), b.VerifierKeyString()})
	if err != nil || rep.Actions != 1 || !vinfo.Ended || vinfo.Dropped != 1 {
		t.Fatalf("the chain after the stolen id: %+v %+v %v", rep, vinfo, err)
	}
}

// Garbage on the chain subject of a run that has not begun does not make
// it a run to resume: the worker starts it after the garbage.
func TestGarbageBeforeTheChainIsSkipped(t *testing.T) {
	fx := newFleetFixture(t)
	_, h := fx.connect()
	id := fx.submit(h, limitJob(2))
	publishGarbage(t, h, id)
	ncA, hA := fx.connect()
	fx.worker("A", 1, 30*time.Second, ncA, hA)
	s := waitState(t, h, id, "final state", func(s RunState) bool { return Final(s.State) })
	if s.State != StateLimit || s.Iteration != 2 {
		t.Fatalf("state %+v, want limit after 2 iterations", s)
	}
	if s.ChainSkipped != 1 || !strings.Contains(s.ChainNote, "it is not a chain line") {
		t.Errorf("the run's state does not report the garbage: %d %q", s.ChainSkipped, s.ChainNote)
	}
	fx.checkRun(h, id, 2)
}
