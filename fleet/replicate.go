package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/ledger"
)

// Headers of a chain message besides Nats-Msg-Id.
const (
	// HeaderSeq is the action seq of an a line, the last seq a checkpoint
	// covers, the first seq of a segment (key) or the count (end).
	HeaderSeq = "Ralph-Seq"
	// HeaderFrom, on a key message, is the first action seq the segment
	// publishes.
	HeaderFrom = "Ralph-From"
)

// ErrFenced reports that another worker's store continued the run's chain
// on the stream: this worker lost the run and must stop it at once
// without recording anything more.
var ErrFenced = errors.New("another worker owns the run")

// MsgID is the Nats-Msg-Id of a chain message: a retried publish of the
// same line by the same store is deduplicated by the stream.
func MsgID(runID, storeID, kind string, seq uint64) string {
	return runID + "/" + storeID + "/" + kind + "/" + strconv.FormatUint(seq, 10)
}

// ReplicateOption tunes a Replicator.
type ReplicateOption func(*replicateOptions)

type replicateOptions struct {
	onAck          func(kind string, seq uint64, acked time.Time)
	publishTimeout time.Duration
	onSkip         func(note string)
	batchBytes     int
	cert           *Certificate
}

// WithCertificate puts the fleet key's certificate of the store's key on
// the segment's key line (certify.go), so readers given the fleet key
// accept the segment.
func WithCertificate(c Certificate) ReplicateOption {
	return func(o *replicateOptions) { o.cert = &c }
}

// WithAckHook calls fn, on the replicator's goroutine, each time the
// stream acknowledges a line: kind is key, a, c, c1 or end, seq its
// Ralph-Seq. Benchmarks measure replication lag with it.
func WithAckHook(fn func(kind string, seq uint64, acked time.Time)) ReplicateOption {
	return func(o *replicateOptions) { o.onAck = fn }
}

// WithSkipHook calls fn, on the replicator's goroutine, for each message
// on the run's subject that is not a line of its chain (garbage another
// client published there), which the replicator skips.
func WithSkipHook(fn func(note string)) ReplicateOption {
	return func(o *replicateOptions) { o.onSkip = fn }
}

// WithPublishTimeout bounds the wait for one acknowledgement before the
// publish is retried (default 5s).
func WithPublishTimeout(d time.Duration) ReplicateOption {
	return func(o *replicateOptions) { o.publishTimeout = d }
}

// Replicator publishes a run's chain, as it is written, to the run's
// subject of stream RALPH_CHAINS: first its segment's key line, then the
// a and c lines of each commit once it is durable, then (End) the end
// line. Every message carries the subject's last sequence as the stream
// must still have it (Nats-Expected-Last-Subject-Sequence), so once another
// worker's store has published on the subject this one is refused and
// stops with ErrFenced. The expected sequence of a message is known only
// when the previous one is acknowledged, so the lines of one run are
// published one after another, on the replicator's own goroutine: the
// run's appends never wait for the stream.
type Replicator struct {
	js      jetstream.JetStream
	stream  jetstream.Stream
	st      *ledger.Store
	runID   string
	subject string
	storeID string
	o       replicateOptions

	lastSeq uint64 // the stream sequence of this replicator's last message; owned by the publishing goroutine
	next    uint64 // the next action seq to publish; owned likewise

	mu       sync.Mutex
	acked    uint64 // every action up to here is in the stream with its checkpoint
	err      error  // sticky: ErrFenced or a publish that cannot succeed
	skipped  uint64 // garbage found after this replicator's own lines
	skipNote string
	progress chan struct{} // closed and replaced when acked or err changes

	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
}

// Replicate starts replicating st, the store of run runID, from action
// fromSeq (1 for a new run; one past the chain read back when a run
// resumes), expecting lastStreamSeq to be the last message on the run's
// subject (0 for a new run; ChainInfo.LastStreamSeq when resuming). It
// publishes the segment's key line before it returns: ErrFenced then
// means the chain moved on since it was read. Replication goes on until
// ctx ends, Close or End.
func Replicate(ctx context.Context, js jetstream.JetStream, st *ledger.Store, runID string, fromSeq, lastStreamSeq uint64, opts ...ReplicateOption) (*Replicator, error) {
	if err := checkRunID(runID); err != nil {
		return nil, err
	}
	vkey := st.VerifierKeyString()
	if vkey == "" || st.ID() == "" {
		return nil, fmt.Errorf("the store of run %s records no key; it cannot be replicated", runID)
	}
	if fromSeq == 0 {
		fromSeq = 1
	}
	if h := st.Head().Seq; fromSeq > h+1 {
		return nil, fmt.Errorf("replicate run %s from action %d: its store holds only %d actions", runID, fromSeq, h)
	}
	stream, err := js.Stream(ctx, StreamChains)
	if err != nil {
		return nil, fmt.Errorf("replicate run %s: stream %s: %w (run ralph fleet serve, or a worker, to make it)", runID, StreamChains, err)
	}
	r := &Replicator{
		js: js, stream: stream, st: st, runID: runID, subject: ChainSubject(runID), storeID: st.ID(),
		o:       replicateOptions{publishTimeout: 5 * time.Second, batchBytes: 4 << 20},
		lastSeq: lastStreamSeq, next: fromSeq, acked: fromSeq - 1,
		progress: make(chan struct{}), done: make(chan struct{}),
	}
	for _, opt := range opts {
		opt(&r.o)
	}
	if err := r.publish(ctx, ledger.BundleKey, fromSeq, []byte("key "+vkey)); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	go r.run(rctx)
	return r, nil
}

// checkRunID refuses a run id that cannot be one subject token.
func checkRunID(runID string) error {
	if runID == "" || strings.ContainsAny(runID, ". *>\t\r\n/") {
		return fmt.Errorf("run id %q cannot name a NATS subject: it must be one token without spaces, dots, slashes or wildcards", runID)
	}
	return nil
}

// run publishes what the store commits until ctx ends.
func (r *Replicator) run(ctx context.Context) {
	defer close(r.done)
	defer func() {
		if p := recover(); p != nil {
			r.fail(fmt.Errorf("replication of run %s stopped: %v", r.runID, p))
		}
	}()
	wake := r.st.Subscribe(ctx, r.next)
	for {
		if err := r.catchUp(ctx); err != nil {
			if ctx.Err() == nil {
				r.fail(err)
			}
			return
		}
		select {
		case _, ok := <-wake:
			if !ok {
				if ctx.Err() == nil {
					r.fail(fmt.Errorf("replication of run %s stopped: its store closed", r.runID))
				}
				return
			}
		drain:
			for {
				select {
				case _, ok := <-wake:
					if !ok {
						break drain
					}
				default:
					break drain
				}
			}
		case <-ctx.Done():
			return
		}
	}
}

// line is one bundle line waiting to be published.
type line struct {
	kind string
	seq  uint64
	data []byte
}

// errBatchFull stops BundleLines after a checkpoint once a batch is big.
var errBatchFull = errors.New("batch full")

// catchUp publishes every whole commit from r.next on. The lines are
// copied out of the store's snapshot before they are published, so a slow
// stream never holds a read transaction (or the store's Close) open.
func (r *Replicator) catchUp(ctx context.Context) error {
	for {
		var batch []line
		size, lastCovered := 0, uint64(0)
		_, err := r.st.BundleLines(ctx, r.next, func(l []byte, kind string, seq uint64) error {
			batch = append(batch, line{kind: kind, seq: seq, data: bytes.Clone(l)})
			size += len(l)
			if kind != ledger.BundleAct {
				lastCovered = seq
				if size >= r.o.batchBytes {
					return errBatchFull
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, errBatchFull) {
			return fmt.Errorf("replicate run %s: read its store: %w", r.runID, err)
		}
		for _, l := range batch {
			if l.seq > lastCovered {
				break // actions after the last checkpoint of a full batch
			}
			if err := r.publish(ctx, l.kind, l.seq, l.data); err != nil {
				return err
			}
			if l.kind != ledger.BundleAct {
				r.next = l.seq + 1
				r.advance(l.seq)
			}
		}
		if !errors.Is(err, errBatchFull) {
			return nil
		}
	}
}

// publish appends one line to the run's subject, fenced by the subject's
// last sequence, retrying what may be transient.
func (r *Replicator) publish(ctx context.Context, kind string, seq uint64, data []byte) error {
	m, id := r.lineMsg(kind, seq, data)
	wait := 10 * time.Millisecond
	behind := 0 // refusals while the subject still ends at our last message
	for {
		pctx, cancel := context.WithTimeout(ctx, r.o.publishTimeout)
		ack, err := r.js.PublishMsg(pctx, m, jetstream.WithExpectLastSequencePerSubject(r.lastSeq))
		cancel()
		if err == nil && ack.Duplicate {
			var fatal error
			if err, fatal = r.checkDuplicate(ctx, ack.Sequence, id, data); fatal != nil {
				return fatal
			}
		}
		if err == nil {
			r.stored(kind, seq, ack.Sequence)
			return nil
		}
		if wrongLastSequence(err) {
			stored, again, rerr := r.refusedLast(ctx, kind, seq, id, data, err)
			switch {
			case rerr != nil:
				return rerr
			case stored:
				return nil
			case again:
				continue
			}
			// The subject still ends at this replicator's last message (or
			// the stream reads behind it): a new stream leader catching up.
			if behind++; behind > 60 {
				return fmt.Errorf("replicate %s %d of run %s: stream %s keeps refusing the subject's last sequence %d although it holds no later message: %w", kind, seq, r.runID, StreamChains, r.lastSeq, err)
			}
		} else if !transient(err) {
			return fmt.Errorf("replicate %s %d of run %s to stream %s: %w", kind, seq, r.runID, StreamChains, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// lineMsg is the message that carries one line, with its id and seq (and,
// for a key line, the certificate headers); id is its message id.
func (r *Replicator) lineMsg(kind string, seq uint64, data []byte) (m *nats.Msg, id string) {
	m = nats.NewMsg(r.subject)
	m.Data = data
	id = MsgID(r.runID, r.storeID, kind, seq)
	m.Header.Set(jetstream.MsgIDHeader, id)
	m.Header.Set(HeaderSeq, strconv.FormatUint(seq, 10))
	if kind == ledger.BundleKey {
		m.Header.Set(HeaderFrom, strconv.FormatUint(seq, 10))
		if r.o.cert != nil {
			r.o.cert.headers(m.Header)
		}
	}
	return m, id
}

// stored notes that the line is the subject's message at streamSeq.
func (r *Replicator) stored(kind string, seq, streamSeq uint64) {
	r.lastSeq = streamSeq
	if r.o.onAck != nil {
		r.o.onAck(kind, seq, time.Now())
	}
}

// checkDuplicate checks that the message a duplicate's ack names is this
// very line. A duplicate's ack carries the sequence of the copy stored
// first (a clustered stream checks the message id first): it must be this
// line, not another client's message that took its id. err is a transient
// error to publish again after; fatal ends the publish.
func (r *Replicator) checkDuplicate(ctx context.Context, streamSeq uint64, id string, data []byte) (retry, fatal error) {
	m, gerr := r.stream.GetMsg(ctx, streamSeq)
	switch {
	case gerr != nil && !transient(gerr):
		return nil, fmt.Errorf("replicate run %s: read message %d of stream %s, which the stream took for line %s: %w", r.runID, streamSeq, StreamChains, id, gerr)
	case gerr != nil: // a new leader: publish again, and look again
		return gerr, nil
	case m.Subject != r.subject || m.Header.Get(jetstream.MsgIDHeader) != id || !bytes.Equal(m.Data, data):
		return nil, fmt.Errorf("replicate run %s: message %d of stream %s carries the id of line %s but not its bytes; another client published it, and the stream refuses the line as its duplicate", r.runID, streamSeq, StreamChains, id)
	}
	return nil, nil
}

// refusedLast looks at what the subject holds when the stream refused the
// expected last sequence (err): stored when this very line is there,
// again when only garbage came after this replicator's last message (it is
// skipped), an error when another store continued the chain (ErrFenced)
// or the stream cannot be read; none of them when the stream is behind.
func (r *Replicator) refusedLast(ctx context.Context, kind string, seq uint64, id string, data []byte, err error) (stored, again bool, _ error) {
	// A single node checks the expected sequence before the message
	// id, so a retry of a line that was stored is refused rather
	// than acknowledged as a duplicate: look at what is there.
	last, lerr := r.stream.GetLastMsgForSubject(ctx, r.subject)
	switch {
	case lerr == nil && last.Header.Get(jetstream.MsgIDHeader) == id && bytes.Equal(last.Data, data):
		r.stored(kind, seq, last.Sequence)
		return true, false, nil
	case lerr == nil && last.Sequence > r.lastSeq:
		found, fence, serr := r.scanAfter(ctx, id, data, last.Sequence)
		if serr != nil {
			return false, false, fmt.Errorf("replicate %s %d of run %s: read the messages after %d of %s: %w", kind, seq, r.runID, r.lastSeq, r.subject, serr)
		}
		if fence == "" {
			// Only garbage (and perhaps this very line) came after
			// this replicator's last message: it is skipped, and
			// the chain goes on after it.
			r.lastSeq = last.Sequence
			if found {
				if r.o.onAck != nil {
					r.o.onAck(kind, seq, time.Now())
				}
				return true, false, nil
			}
			return false, true, nil
		}
		return false, false, fmt.Errorf("%w: %w: the chain of run %s on stream %s was continued by message %d (%s), not by store %s",
			ErrFenced, err, r.runID, StreamChains, last.Sequence, last.Header.Get(jetstream.MsgIDHeader), r.storeID)
	case lerr != nil && !transient(lerr):
		return false, false, fmt.Errorf("replicate %s %d of run %s: read the last message of %s: %w", kind, seq, r.runID, r.subject, lerr)
	}
	return false, false, nil
}

// maxScan bounds the messages scanAfter reads: a subject flooded past it
// is taken as lost.
const maxScan = 10000

// scanAfter reads the run's subject after this replicator's last message,
// up to stream sequence upto: stored reports line id among them (a retry
// whose first publish was stored), fence names another store's key line
// (that worker owns the run now; "" when there is none). Anything else is
// not part of the chain (ChainInfo.Skipped): it is counted and noted.
func (r *Replicator) scanAfter(ctx context.Context, id string, data []byte, upto uint64) (stored bool, fence string, err error) {
	for next, n := r.lastSeq+1, 0; next <= upto; n++ {
		if n == maxScan {
			return false, "", fmt.Errorf("over %d messages follow this worker's last line", maxScan)
		}
		m, err := r.stream.GetMsg(ctx, next, jetstream.WithGetMsgSubject(r.subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return false, "", err
		}
		if m.Sequence > upto {
			break
		}
		next = m.Sequence + 1
		mid := m.Header.Get(jetstream.MsgIDHeader)
		switch {
		case mid == id && bytes.Equal(m.Data, data):
			stored = true
		case r.isKeyLine(m.Header, mid):
			return false, mid, nil
		default:
			r.skip(fmt.Sprintf("message %d of stream %s on the subject of run %s (message id %q) is not a line of its chain; skipped", m.Sequence, StreamChains, r.runID, mid))
		}
	}
	return stored, "", nil
}

// isKeyLine reports whether a message's headers make it another store's
// key line for this run: the start of another worker's segment.
func (r *Replicator) isKeyLine(h nats.Header, mid string) bool {
	parts := strings.Split(mid, "/")
	return len(parts) == 4 && parts[0] == r.runID && parts[1] != r.storeID && parts[1] != "" &&
		parts[2] == ledger.BundleKey && parts[3] == h.Get(HeaderSeq) && h.Get(HeaderFrom) == h.Get(HeaderSeq)
}

// skip counts a message that is not part of the chain.
func (r *Replicator) skip(note string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.skipped++
	if r.skipNote == "" {
		r.skipNote = note
	}
	if r.o.onSkip != nil {
		r.o.onSkip(note)
	}
}

// Skipped returns how many messages on the run's subject this replicator
// found between its own lines and skipped (garbage: not a line of the
// chain), and why for the first.
func (r *Replicator) Skipped() (uint64, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped, r.skipNote
}

// wrongLastSequence reports the stream refusing an expected subject
// sequence.
func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// transient reports an error a retry may cure: no answer in time, no
// stream leader for now, a connection being re-established.
func transient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code >= 500 || apiErr.Code == 408
	}
	return !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubject) &&
		!errors.Is(err, nats.ErrMaxPayload) && !errors.Is(err, context.Canceled)
}

func (r *Replicator) advance(seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq > r.acked {
		r.acked = seq
		close(r.progress)
		r.progress = make(chan struct{})
	}
}

func (r *Replicator) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
		close(r.progress)
		r.progress = make(chan struct{})
	}
}

// Err returns why replication stopped: an error wrapping ErrFenced when
// another worker owns the run, nil while it goes on.
func (r *Replicator) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Done is closed when replication stops: after Close or End, when the
// context given to Replicate ends, or on an error (Err says which; a
// worker stops the run at once when it wraps ErrFenced).
func (r *Replicator) Done() <-chan struct{} { return r.done }

// Acked returns the last action seq the stream holds with its checkpoint.
func (r *Replicator) Acked() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acked
}

// Flush waits until everything the store had committed when Flush was
// called is in the stream with its checkpoint.
func (r *Replicator) Flush(ctx context.Context) error {
	target := r.st.Head().Seq
	for {
		r.mu.Lock()
		acked, err, progress := r.acked, r.err, r.progress
		r.mu.Unlock()
		switch {
		case err != nil:
			return err
		case acked >= target:
			return nil
		}
		select {
		case <-progress:
		case <-r.done:
			if r.Acked() >= target {
				return nil
			}
			if err := r.Err(); err != nil {
				return err
			}
			return fmt.Errorf("replication of run %s stopped with actions %d–%d not in the stream", r.runID, r.Acked()+1, target)
		case <-ctx.Done():
			return fmt.Errorf("flush the replication of run %s (actions %d–%d not yet in the stream): %w", r.runID, acked+1, target, ctx.Err())
		}
	}
}

// stop ends the publishing goroutine and waits for it.
func (r *Replicator) stop() {
	r.stopOnce.Do(r.cancel)
	<-r.done
}

// Close flushes, then stops replicating. It may be called more than once.
func (r *Replicator) Close(ctx context.Context) error {
	err := r.Flush(ctx)
	r.stop()
	return err
}

// End publishes the rest of the chain and its end line — the run ended —
// and stops replicating. Nothing may be appended to the store after it.
func (r *Replicator) End(ctx context.Context) error {
	if err := r.Flush(ctx); err != nil {
		r.stop()
		return err
	}
	r.stop()
	if err := r.Err(); err != nil {
		return err
	}
	// The goroutine is gone: publish here whatever it had not seen.
	if err := r.catchUp(ctx); err != nil {
		r.fail(err)
		return err
	}
	cp, err := r.st.LatestCheckpoint()
	if err != nil {
		return fmt.Errorf("end the replication of run %s: %w", r.runID, err)
	}
	if h := r.st.Head(); cp.Seq != h.Seq || r.next != h.Seq+1 {
		return fmt.Errorf("end the replication of run %s: its store holds %d actions but %d are replicated up to checkpoint %d", r.runID, h.Seq, r.next-1, cp.Seq)
	}
	if err := r.publish(ctx, ledger.BundleEnd, cp.Seq, ledger.BundleEndLine(cp.Seq, cp.ChainHash, cp.Root)); err != nil {
		r.fail(err)
		return err
	}
	return nil
}
