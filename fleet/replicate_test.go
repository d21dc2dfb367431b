package fleet_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/fleet"
	"github.com/ralphloop/ralph/fleet/fleettest"
	"github.com/ralphloop/ralph/internal/eventually"
	"github.com/ralphloop/ralph/ledger"
	"github.com/ralphloop/ralph/rtfs"
)

// newFleet starts a JetStream node and makes the fleet's streams.
func newFleet(t testing.TB) (jetstream.JetStream, *fleet.Handles) {
	t.Helper()
	srv := fleettest.Node(t)
	nc, err := fleettest.Dial(srv.ClientURL(), fleet.RoleWorker)
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
	return js, h
}

func memStore(t testing.TB) *ledger.Store {
	t.Helper()
	st, err := ledger.Open(ledger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func action(runID string, i int) *ledger.Action {
	return &ledger.Action{
		RunID: runID, ActionID: fmt.Sprintf("%s-act-%04d", runID, i), Type: ledger.CapabilityCall,
		FunctionName: "shell.exec", Success: true, Cost: 0.001 * float64(i%5), DurationMS: int64(i),
		Arguments: []rtfs.Value{rtfs.String(fmt.Sprintf("step %d", i)), rtfs.Keyword("k")},
		Result:    rtfs.MapValue(rtfs.NewMap(rtfs.Keyword("exit"), rtfs.Int(0), rtfs.Keyword("stdout"), rtfs.String(strings.Repeat("x", i%40)))),
		Timestamp: time.Date(2026, 11, 23, 20, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond),
	}
}

// appendBurst appends actions from..from+n-1 from n goroutines, so that
// commits hold several actions.
func appendBurst(t testing.TB, st *ledger.Store, runID string, from, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := from; i < from+n; i++ {
		wg.Go(func() {
			if _, err := st.Append(context.Background(), action(runID, i)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func hashes(t testing.TB, st *ledger.Store) []ledger.Hash {
	t.Helper()
	var out []ledger.Hash
	if err := st.Range(1, func(a ledger.Action) error {
		out = append(out, a.ActionHash)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameHashes(t testing.TB, want, got *ledger.Store) {
	t.Helper()
	w, g := hashes(t, want), hashes(t, got)
	if len(w) != len(g) {
		t.Fatalf("%d actions, want %d", len(g), len(w))
	}
	for i := range w {
		if w[i] != g[i] {
			t.Fatalf("action %d: hash %s, want %s", i+1, g[i], w[i])
		}
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A run's store replicated as it is written reads back as the store's own
// bundle, byte for byte, and imports keeping every action hash.
func TestReplicateRoundTrip(t *testing.T) {
	t.Parallel()
	js, _ := newFleet(t)
	ctx := testCtx(t)
	st := memStore(t)
	appendBurst(t, st, "run1", 0, 3) // before replication starts
	r, err := fleet.Replicate(ctx, js, st, "run1", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for b := range 5 {
		appendBurst(t, st, "run1", 3+b*10, 10)
	}
	if err := r.Flush(ctx); err != nil || r.Acked() != 53 {
		t.Fatalf("flush: %v, acked %d", err, r.Acked())
	}
	var live bytes.Buffer
	info, err := fleet.ReadChain(ctx, js, "run1", &live)
	if err != nil || info.Actions != 53 || info.Ended {
		t.Fatalf("read the live chain: %+v %v", info, err)
	}
	if _, err := ledger.ReadBundle(ctx, bytes.NewReader(live.Bytes()), []string{st.VerifierKeyString()}, nil); err != nil {
		t.Fatalf("the live chain does not verify: %v", err)
	}
	appendBurst(t, st, "run1", 53, 7)
	if err := r.End(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatalf("close after end: %v", err)
	}
	var got, want bytes.Buffer
	info, err = fleet.ReadChain(ctx, js, "run1", &got)
	if err != nil || info.Actions != 60 || !info.Ended || len(info.Keys) != 1 || info.Keys[0] != st.VerifierKeyString() {
		t.Fatalf("read the chain: %+v %v", info, err)
	}
	if _, err := st.ExportBundle(&want); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("the stream's bundle differs from the store's:\n%s\nwant\n%s", got.String(), want.String())
	}
	rebuilt, info2, err := fleet.RebuildStore(ctx, js, "run1", ledger.Options{InMemory: true}, []string{st.VerifierKeyString()})
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	if info2.LastStreamSeq != info.LastStreamSeq || rebuilt.Head() != st.Head() {
		t.Fatalf("rebuilt head %v (%+v), want %v", rebuilt.Head(), info2, st.Head())
	}
	sameHashes(t, st, rebuilt)
	if _, err := rebuilt.Verify(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

// A run that moves: store A replicates, dies with an unsigned tail in the
// stream, store B is rebuilt from the stream and continues; the chain
// verifies with both keys, the tail is gone, and A — a zombie — is fenced.
func TestReplicateTwoSegments(t *testing.T) {
	t.Parallel()
	js, h := newFleet(t)
	ctx := testCtx(t)
	a := memStore(t)
	ra, err := fleet.Replicate(ctx, js, a, "run2", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	appendBurst(t, a, "run2", 0, 10)
	if err := ra.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// A died mid-commit: an action of its next commit is in the stream
	// without the checkpoint that would cover it.
	last, err := h.Chains.GetLastMsgForSubject(ctx, fleet.ChainSubject("run2"))
	if err != nil {
		t.Fatal(err)
	}
	tail := nats.NewMsg(fleet.ChainSubject("run2"))
	tail.Data = []byte("a AQAAAAAAAAAL")
	tail.Header.Set(jetstream.MsgIDHeader, fleet.MsgID("run2", a.ID(), "a", 11))
	tail.Header.Set(fleet.HeaderSeq, "11")
	if _, err := js.PublishMsg(ctx, tail, jetstream.WithExpectLastSequencePerSubject(last.Sequence)); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "b")
	b, info, err := fleet.RebuildStore(ctx, js, "run2", ledger.Options{Dir: dir, KeyDir: t.TempDir()}, []string{a.VerifierKeyString()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if info.Actions != 10 || info.Dropped != 1 || info.Ended || info.LastStreamSeq != last.Sequence+1 {
		t.Fatalf("rebuilt from %+v", info)
	}
	rb, err := fleet.Replicate(ctx, js, b, "run2", info.Actions+1, info.LastStreamSeq)
	if err != nil {
		t.Fatal(err)
	}
	appendBurst(t, b, "run2", 10, 6)
	if err := rb.End(ctx); err != nil {
		t.Fatal(err)
	}

	// The zombie appends and is refused.
	appendBurst(t, a, "run2", 100, 1)
	if err := ra.Flush(ctx); !errors.Is(err, fleet.ErrFenced) || !errors.Is(ra.Err(), fleet.ErrFenced) {
		t.Fatalf("the zombie's flush: %v (Err %v), want ErrFenced", err, ra.Err())
	}
	select {
	case <-ra.Done():
	case <-ctx.Done():
		t.Fatal("a fenced replicator did not stop")
	}
	if err := ra.End(ctx); !errors.Is(err, fleet.ErrFenced) {
		t.Fatalf("the zombie's end: %v, want ErrFenced", err)
	}
	if _, err := fleet.Replicate(ctx, js, a, "run2", 1, 0); !errors.Is(err, fleet.ErrFenced) {
		t.Fatalf("a replicator starting on a taken run: %v, want ErrFenced", err)
	}

	keys := []string{a.VerifierKeyString(), b.VerifierKeyString()}
	rep, info, err := fleet.VerifyChain(ctx, js, "run2", keys)
	if err != nil || rep.Actions != 16 || !info.Ended || len(info.Keys) != 2 || info.Keys[1] != keys[1] || info.Dropped != 1 {
		t.Fatalf("verify: %+v %+v %v", rep, info, err)
	}
	if _, _, err := fleet.VerifyChain(ctx, js, "run2", keys[:1]); err == nil || !strings.Contains(err.Error(), "not by the pinned key") ||
		!strings.Contains(err.Error(), "the chain of run run2 in stream RALPH_CHAINS does not verify: line ") ||
		!strings.Contains(err.Error(), " (key line of the segment from action 11, message ") {
		t.Fatalf("verify pinning only A's key: %v", err)
	}
	c, _, err := fleet.RebuildStore(ctx, js, "run2", ledger.Options{InMemory: true}, keys)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sameHashes(t, b, c)
}

// A publish retried after the stream stored it (a lost ack) is taken as
// done, not as another worker's: on one node the stream checks the
// expected sequence before the message id.
func TestReplicateRetryOfStoredLine(t *testing.T) {
	t.Parallel()
	js, _ := newFleet(t)
	ctx := testCtx(t)
	st := memStore(t)
	appendBurst(t, st, "run3", 0, 4)
	r1, err := fleet.Replicate(ctx, js, st, "run3", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	r1.Close(ctx)
	r1.Close(ctx)
	// The same store starting again from the same place: its key line is
	// the stream's last message.
	var buf bytes.Buffer
	info, err := fleet.ReadChain(ctx, js, "run3", &buf)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := fleet.Replicate(ctx, js, st, "run3", 5, info.LastStreamSeq)
	if err != nil {
		t.Fatal(err)
	}
	r3, err := fleet.Replicate(ctx, js, st, "run3", 5, info.LastStreamSeq)
	if err != nil {
		t.Fatalf("the same key line again: %v", err)
	}
	r3.Close(ctx)
	appendBurst(t, st, "run3", 4, 3)
	if err := r2.End(ctx); err != nil {
		t.Fatal(err)
	}
	if _, info, err := fleet.VerifyChain(ctx, js, "run3", []string{st.VerifierKeyString()}); err != nil || info.Actions != 7 || !info.Ended {
		t.Fatalf("verify: %+v %v", info, err)
	}
}

// copyChain republishes run from's messages as run to's, changing one.
func copyChain(t *testing.T, js jetstream.JetStream, h *fleet.Handles, from, to string, change func(i int, m *nats.Msg)) {
	t.Helper()
	ctx := testCtx(t)
	last, err := h.Chains.GetLastMsgForSubject(ctx, fleet.ChainSubject(from))
	if err != nil {
		t.Fatal(err)
	}
	seq := uint64(1)
	for i := 0; ; i++ {
		m, err := h.Chains.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(fleet.ChainSubject(from)))
		if err != nil {
			t.Fatal(err)
		}
		out := nats.NewMsg(fleet.ChainSubject(to))
		out.Data = bytes.Clone(m.Data)
		for _, k := range []string{fleet.HeaderSeq, fleet.HeaderFrom} {
			if v := m.Header.Get(k); v != "" {
				out.Header.Set(k, v)
			}
		}
		out.Header.Set(jetstream.MsgIDHeader, to+strings.TrimPrefix(m.Header.Get(jetstream.MsgIDHeader), from))
		change(i, out)
		if _, err := js.PublishMsg(ctx, out); err != nil {
			t.Fatal(err)
		}
		if m.Sequence == last.Sequence {
			return
		}
		seq = m.Sequence + 1
	}
}

// A flipped byte in a message is named: which line, which run, which
// message of the stream.
func TestReadChainNamesCorruptMessage(t *testing.T) {
	t.Parallel()
	js, h := newFleet(t)
	ctx := testCtx(t)
	st := memStore(t)
	r, err := fleet.Replicate(ctx, js, st, "good", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := st.Append(ctx, action("good", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.End(ctx); err != nil {
		t.Fatal(err)
	}
	// Message 0 is the key, then a/c pairs: message 5 is action 3.
	flip := func(at int, off func(enc []byte) int) func(int, *nats.Msg) {
		return func(i int, m *nats.Msg) {
			if i == at {
				enc, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(string(m.Data), "a "))
				if err != nil {
					t.Fatal(err)
				}
				enc[off(enc)] ^= 0x01
				m.Data = []byte("a " + base64.StdEncoding.EncodeToString(enc))
			}
		}
	}
	copyChain(t, js, h, "good", "seqflip", flip(5, func([]byte) int { return 8 }))
	copyChain(t, js, h, "good", "textflip", flip(5, func(enc []byte) int { return bytes.Index(enc, []byte("step 2")) }))
	copyChain(t, js, h, "good", "order", func(i int, m *nats.Msg) {
		if i == 5 {
			m.Header.Set(fleet.HeaderSeq, "4")
			m.Header.Set(jetstream.MsgIDHeader, fleet.MsgID("order", st.ID(), "a", 4))
		}
	})
	for run, want := range map[string]string{
		"seqflip":  "the chain of run seqflip in stream RALPH_CHAINS does not verify: line 7 (action 3, message ",
		"textflip": "the chain of run textflip in stream RALPH_CHAINS does not verify: line 8 (checkpoint 3, message ",
	} {
		_, _, err := fleet.RebuildStore(ctx, js, run, ledger.Options{InMemory: true}, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", run, err, want)
		}
	}
	// A line out of order is not part of the chain: it is skipped, and so
	// is everything after it that cannot follow the chain before it; what
	// is left verifies, as a chain that has not ended.
	st2, info, err := fleet.RebuildStore(ctx, js, "order", ledger.Options{InMemory: true}, nil)
	if err != nil {
		t.Fatalf("order: %v", err)
	}
	st2.Close()
	if info.Actions != 2 || info.Ended || info.Skipped == 0 || !strings.HasPrefix(info.SkipNotes[0], "action 4 in the stream of run order (message ") {
		t.Errorf("order: %+v", info)
	}
	if _, _, err := fleet.VerifyChain(ctx, js, "nosuchrun", nil); err == nil || !strings.Contains(err.Error(), "holds no chain of run nosuchrun") {
		t.Errorf("a run with no chain: %v", err)
	}
	if _, err := fleet.ReadChain(ctx, js, "a.b", &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "cannot name a NATS subject") {
		t.Errorf("a run id with a dot: %v", err)
	}
}

// On a three-node cluster, replication goes on when the chains stream's
// leader stops: publishes are retried with the same message ids (the
// stream deduplicates them) until a new leader answers, and the chain
// still verifies and imports with every hash.
func TestReplicateSurvivesStreamLeaderStop(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node cluster; TestReplicateTwoSegments covers the single node")
	}
	t.Parallel()
	c := fleettest.NewCluster(t, 3)
	nc, err := fleettest.Dial(c.URL(), fleet.RoleWorker, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := testCtx(t)
	cfg := fleet.DefaultConfig()
	cfg.Replicas = 3
	if _, err := fleet.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	st := memStore(t)
	r, err := fleet.Replicate(ctx, js, st, "run4", 1, 0, fleet.WithPublishTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	appendBurst(t, st, "run4", 0, 10)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	leader := c.StreamLeader(fleet.StreamChains)
	if leader < 0 {
		t.Fatal("no leader for the chains stream")
	}
	c.Stop(leader)
	for b := range 4 {
		appendBurst(t, st, "run4", 10+b*5, 5)
	}
	if err := r.End(ctx); err != nil {
		t.Fatal(err)
	}
	rebuilt, info, err := fleet.RebuildStore(ctx, js, "run4", ledger.Options{InMemory: true}, []string{st.VerifierKeyString()})
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	if !info.Ended || info.Actions != 30 {
		t.Fatalf("rebuilt from %+v", info)
	}
	sameHashes(t, st, rebuilt)
}

// syncBuffer is a bytes.Buffer safe for a writer and a poller.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FollowChain waits for a run's chain to begin, shows each commit as it is
// replicated, and returns at the end line with a bundle that verifies.
func TestFollowChain(t *testing.T) {
	t.Parallel()
	js, _ := newFleet(t)
	ctx := testCtx(t)
	var out syncBuffer
	type result struct {
		info fleet.ChainInfo
		err  error
	}
	done := make(chan result, 1)
	go func() {
		info, err := fleet.FollowChain(ctx, js, "run5", &out)
		done <- result{info, err}
	}()
	st := memStore(t)
	r, err := fleet.Replicate(ctx, js, st, "run5", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := st.Append(ctx, action("run5", i)); err != nil {
			t.Fatal(err)
		}
	}
	for strings.Count(out.String(), "\nc ") < 3 {
		select {
		case res := <-done:
			t.Fatalf("follow returned early: %+v %v", res.info, res.err)
		case <-ctx.Done():
			t.Fatalf("the followed chain shows %q", out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	appendBurst(t, st, "run5", 3, 5)
	if err := r.End(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || !res.info.Ended || res.info.Actions != 8 {
		t.Fatalf("follow: %+v %v", res.info, res.err)
	}
	var want bytes.Buffer
	if _, err := st.ExportBundle(&want); err != nil {
		t.Fatal(err)
	}
	if out.String() != want.String() {
		t.Fatalf("followed:\n%s\nwant:\n%s", out.String(), want.String())
	}
	followNeverBegins(t, ctx, js, "run6")
}

// followNeverBegins follows the chain of runID, which never begins: once
// its consumer is in place (the chains stream counts one more) it waits,
// and only its context ends it, with the context's error. (The fleet's
// roles may not list consumers, so the stream's count is what shows it.)
func followNeverBegins(t *testing.T, ctx context.Context, js jetstream.JetStream, runID string) {
	t.Helper()
	consumers := func() int {
		stream, err := js.Stream(ctx, fleet.StreamChains)
		if err != nil {
			t.Fatal(err)
		}
		si, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return si.State.Consumers
	}
	before := consumers()
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	followed := make(chan error, 1)
	go func() { _, err := fleet.FollowChain(fctx, js, runID, &bytes.Buffer{}); followed <- err }()
	eventually.True(t, "a consumer of run "+runID+"'s chain", func() bool { return consumers() > before })
	select {
	case err := <-followed:
		t.Fatalf("following a chain that never begins returned by itself: %v", err)
	default:
	}
	cancel()
	if err := <-followed; !errors.Is(err, context.Canceled) {
		t.Fatalf("following a chain that never begins, cancelled: %v", err)
	}
}

// A replicator whose context ends stops; a later Flush says what is not
// in the stream instead of waiting for ever.
func TestReplicateStopsWithItsContext(t *testing.T) {
	t.Parallel()
	js, _ := newFleet(t)
	ctx := testCtx(t)
	st := memStore(t)
	rctx, cancel := context.WithCancel(ctx)
	r, err := fleet.Replicate(rctx, js, st, "run7", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	appendBurst(t, st, "run7", 0, 2)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-r.Done()
	appendBurst(t, st, "run7", 2, 1)
	if err := r.Flush(ctx); err == nil || !strings.Contains(err.Error(), "replication of run run7 stopped with actions 3–3 not in the stream") {
		t.Fatalf("flush after the context ended: %v", err)
	}
	if _, err := fleet.Replicate(ctx, js, st, "run7", 9, 0); err == nil || !strings.Contains(err.Error(), "its store holds only 3 actions") {
		t.Fatalf("replicating from past the head: %v", err)
	}
}

// flakyJS is a JetStream whose publishes fail as a stream changing leaders
// makes them fail: the ack lost after the message was stored, or the
// expected sequence refused while the subject still ends at the
// publisher's own last message.
type flakyJS struct {
	jetstream.JetStream
	mu       sync.Mutex
	loseAcks int // publish, then report a timeout
	refuse   int // report a wrong last sequence without publishing
}

func (f *flakyJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	f.mu.Lock()
	lose, refuse := f.loseAcks > 0, f.refuse > 0 && f.loseAcks == 0
	if lose {
		f.loseAcks--
	} else if refuse {
		f.refuse--
	}
	f.mu.Unlock()
	if refuse {
		return nil, fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant, Description: "wrong last sequence"})
	}
	ack, err := f.JetStream.PublishMsg(ctx, m, opts...)
	if lose && err == nil {
		return nil, context.DeadlineExceeded
	}
	return ack, err
}

// Lost acks and spurious refusals are retried, neither duplicating a line
// nor taken for another worker.
func TestReplicateRetriesLostAcksAndLeaderChanges(t *testing.T) {
	t.Parallel()
	js, h := newFleet(t)
	ctx := testCtx(t)
	flaky := &flakyJS{JetStream: js, loseAcks: 3, refuse: 3}
	st := memStore(t)
	appendBurst(t, st, "run8", 0, 4)
	r, err := fleet.Replicate(ctx, flaky, st, "run8", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	appendBurst(t, st, "run8", 4, 4)
	flaky.mu.Lock()
	flaky.loseAcks, flaky.refuse = 2, 2
	flaky.mu.Unlock()
	if err := r.End(ctx); err != nil {
		t.Fatal(err)
	}
	var got, want bytes.Buffer
	info, err := fleet.ReadChain(ctx, js, "run8", &got)
	if err != nil || !info.Ended || info.Actions != 8 {
		t.Fatalf("read: %+v %v", info, err)
	}
	if _, err := st.ExportBundle(&want); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("the stream holds:\n%s\nwant:\n%s", got.String(), want.String())
	}
	last, err := h.Chains.GetLastMsgForSubject(ctx, fleet.ChainSubject("run8"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(want.String(), "\n") - 1; int(last.Sequence) != lines {
		t.Fatalf("the stream holds %d messages for %d lines: a retry was stored twice", last.Sequence, lines)
	}
}
