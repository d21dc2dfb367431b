package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ralphloop/ralph/ledger"
)

// ChainInfo says what ReadChain read from a run's stream.
type ChainInfo struct {
	// Actions is how many actions the bundle holds, each covered by a
	// checkpoint; a resumed run continues from Actions+1.
	Actions uint64
	// LastStreamSeq is the stream sequence of the last message read on the
	// run's subject: the sequence a resuming worker's first publish expects.
	LastStreamSeq uint64
	// Ended is set when the chain has its end line: the run ended.
	Ended bool
	// Keys are the segments' verifier keys, in order (one per worker
	// attempt that published).
	Keys []string
	// Dropped counts the actions left out because no checkpoint covered
	// them: the tail of an attempt that died mid-commit, or of a commit
	// still being published.
	Dropped uint64
	// Skipped counts the messages on the run's subject that are not part
	// of its chain and were left out: garbage (no chain line, a wrong
	// header or message id), a line out of its segment's order, anything
	// after the end line. SkipNotes says why for the first few of them.
	Skipped   uint64
	SkipNotes []string
	// Uncertified counts the segments skipped because the fleet key did
	// not certify their key (readers given WithFleetKey); Uncertified
	// names the first, with its stream message.
	Uncertified     uint64
	UncertifiedNote string

	lines []lineRef // bundle line 2+i came from lines[i]
}

// lineRef is where a bundle line came from.
type lineRef struct {
	kind      string
	seq       uint64
	streamSeq uint64
}

// chainMsg is one message of a run's subject.
type chainMsg struct {
	streamSeq uint64
	msgID     string
	seq       string // Ralph-Seq
	from      string // Ralph-From
	data      []byte
	n         uint64 // seq, parsed
	// certWorker and certSig are a key line's certificate headers.
	certWorker, certSig string
}

// segmenter turns a run's messages into bundle lines, applying the segment
// rule: a key message with Ralph-From K discards the a lines with seq ≥ K
// that no checkpoint covered (the unsigned tail of the attempt before).
// It checks the messages' order and names; the lines' content is checked
// by whoever reads the bundle (ledger.ReadBundle).
//
// A message that does not fit (garbage, a line out of order, anything after
// the end line) is skipped and counted in ChainInfo.Skipped, never fatal:
// whoever can publish on the subject cannot stop the run with it.
type segmenter struct {
	runID   string
	w       *ledger.BundleWriter
	info    *ChainInfo
	store   string     // the current segment's store id
	next    uint64     // the next action seq expected
	covered uint64     // the last action seq a checkpoint covered
	pending []chainMsg // a lines no checkpoint covered yet
	end     []byte
	// fleetKey, when set, is the key every segment's key must be
	// certified by (certify.go).
	fleetKey string
}

func newSegmenter(runID string, w io.Writer, info *ChainInfo) *segmenter {
	return &segmenter{runID: runID, w: ledger.NewBundleWriter(w), info: info}
}

// kindName names a line kind in errors ("" when it is none).
func kindName(kind string) string {
	switch kind {
	case ledger.BundleAct:
		return "action"
	case ledger.BundleCheckpoint, ledger.BundleCheckpointV1:
		return "checkpoint"
	case ledger.BundleKey:
		return "key line of the segment from action"
	case ledger.BundleEnd:
		return "end line after action"
	}
	return ""
}

// maxSkipNotes bounds ChainInfo.SkipNotes: a flood of garbage is counted,
// not kept.
const maxSkipNotes = 8

// skipError is why a message is not part of the chain.
type skipError struct{ msg string }

func (e *skipError) Error() string { return e.msg }

func (s *segmenter) errorf(m chainMsg, kind string, seq uint64, format string, args ...any) error {
	what := "a message"
	if name := kindName(kind); name != "" {
		what = name + " " + strconv.FormatUint(seq, 10)
	}
	return &skipError{fmt.Sprintf("%s in the stream of run %s (message %d of stream %s): %s", what, s.runID, m.streamSeq, StreamChains, fmt.Sprintf(format, args...))}
}

// add takes the next message of the run's subject: a line of the chain, or
// one skipped (counted and noted). Its error is the bundle's writer's.
func (s *segmenter) add(m chainMsg) error {
	err := s.take(m)
	var skip *skipError
	if errors.As(err, &skip) {
		s.info.Skipped++
		if len(s.info.SkipNotes) < maxSkipNotes {
			s.info.SkipNotes = append(s.info.SkipNotes, skip.msg+"; skipped")
		}
		return nil
	}
	return err
}

// take adds m to the chain, or returns a *skipError (having changed
// nothing) when m is not part of it.
func (s *segmenter) take(m chainMsg) error {
	kind, _, _ := bytes.Cut(m.data, []byte(" "))
	k := string(kind)
	seq, err := strconv.ParseUint(m.seq, 10, 64)
	if kindName(k) == "" || err != nil {
		return s.errorf(m, "", 0, "it is not a chain line with its %s header (%.40q)", HeaderSeq, m.data)
	}
	parts := strings.Split(m.msgID, "/")
	if len(parts) != 4 || parts[0] != s.runID || parts[2] != k || parts[3] != m.seq {
		return s.errorf(m, k, seq, "its message id %q is not %s/<store id>/%s/%d", m.msgID, s.runID, k, seq)
	}
	store := parts[1]
	m.n = seq
	if s.end != nil {
		return s.errorf(m, k, seq, "it follows the chain's end line")
	}
	if k != ledger.BundleKey && store != s.store {
		if s.store == "" {
			return s.errorf(m, k, seq, "the chain does not begin with a key line")
		}
		return s.errorf(m, k, seq, "it comes from store %s, but the segment it is in is store %s's", store, s.store)
	}
	switch k {
	case ledger.BundleKey:
		return s.key(m, store, seq)
	case ledger.BundleAct:
		if seq != s.next {
			return s.errorf(m, k, seq, "action %d was expected", s.next)
		}
		m.data = bytes.Clone(m.data)
		s.pending = append(s.pending, m)
		s.next++
	case ledger.BundleCheckpoint, ledger.BundleCheckpointV1:
		if seq+1 != s.next {
			return s.errorf(m, k, seq, "it follows action %d; a checkpoint follows the last action it covers", s.next-1)
		}
		for _, p := range s.pending {
			if err := s.line(p, ledger.BundleAct); err != nil {
				return err
			}
		}
		s.pending = s.pending[:0]
		s.covered = seq
		return s.line(m, k)
	case ledger.BundleEnd:
		if seq != s.covered || len(s.pending) > 0 {
			return s.errorf(m, k, seq, "the segment has %d actions checkpointed and %d not", s.covered, len(s.pending))
		}
		s.end = bytes.Clone(m.data)
		s.info.Ended = true
		s.info.lines = append(s.info.lines, lineRef{kind: k, seq: seq, streamSeq: m.streamSeq})
	}
	return nil
}

// key starts a segment.
func (s *segmenter) key(m chainMsg, store string, seq uint64) error {
	from, err := strconv.ParseUint(m.from, 10, 64)
	if err != nil || from != seq {
		return s.errorf(m, ledger.BundleKey, seq, "its %s header %q is not its seq", HeaderFrom, m.from)
	}
	// The pending actions are covered+1, covered+2, …: the segment drops
	// them all, and must start at covered+1.
	if from != s.covered+1 {
		kept := 0
		for _, p := range s.pending {
			if p.n < from {
				kept++
			}
		}
		return s.errorf(m, ledger.BundleKey, seq, "the chain before it has %d actions checkpointed and %d not, so a segment must start at action %d",
			s.covered, kept, s.covered+1)
	}
	if s.fleetKey != "" {
		if err := checkCert(s.fleetKey, strings.TrimPrefix(string(m.data), "key "), m.certWorker, m.certSig); err != nil {
			e := s.errorf(m, ledger.BundleKey, seq, "%v", err)
			s.info.Uncertified++
			if s.info.UncertifiedNote == "" {
				s.info.UncertifiedNote = e.Error()
			}
			return e
		}
	}
	s.info.Dropped += uint64(len(s.pending))
	s.pending = s.pending[:0]
	s.store, s.next = store, from
	s.info.Keys = append(s.info.Keys, strings.TrimPrefix(string(m.data), "key "))
	return s.line(m, ledger.BundleKey)
}

func (s *segmenter) line(m chainMsg, kind string) error {
	s.info.lines = append(s.info.lines, lineRef{kind: kind, seq: m.n, streamSeq: m.streamSeq})
	return s.w.Line(m.data)
}

// finish writes the end line: the stream's, or one computed from the
// covered actions of a run still going on. An uncovered tail is left out.
func (s *segmenter) finish() error {
	if s.store == "" {
		return fmt.Errorf("%w: the stream of run %s holds no chain (%d messages on its subject, none a chain's key line)", ErrNoChain, s.runID, s.info.Skipped)
	}
	s.info.Dropped += uint64(len(s.pending))
	s.info.Actions = s.covered
	if s.end == nil {
		s.info.lines = append(s.info.lines, lineRef{kind: ledger.BundleEnd, seq: s.covered})
	}
	return s.w.End(s.end)
}

// ErrNoChain is ReadChain's error when the run's subject holds messages
// but none of them begins a chain (garbage only): the run has not begun.
var ErrNoChain = errors.New("no chain")

// ReadChain writes the chain of run runID, as replicated to stream
// RALPH_CHAINS up to the last message present when it is called, to w as a
// bundle (docs/ledger.md §15), with the segment rule applied; a live run's
// bundle ends with an end line computed from its checkpointed actions. It
// checks the messages' order but not their content: ledger.ReadBundle (or
// VerifyChain, RebuildStore) verifies the bundle.
func ReadChain(ctx context.Context, js jetstream.JetStream, runID string, w io.Writer, opts ...ReadOption) (ChainInfo, error) {
	return readChain(ctx, js, runID, w, false, opts)
}

// ReadOption configures how a run's chain is read.
type ReadOption func(*segmenter)

// WithFleetKey accepts only segments whose key the fleet key fleetKey
// certified (§17); any other is skipped and counted in
// ChainInfo.Uncertified, its lines with it.
func WithFleetKey(fleetKey string) ReadOption {
	return func(s *segmenter) { s.fleetKey = fleetKey }
}

// FollowChain writes the chain of run runID to w as ReadChain does, and
// then each whole commit as it is replicated (w is flushed after each),
// until the chain's end line — the run ended — or ctx ends (an error;
// what was written then has no end line). A run whose chain has not begun
// yet is waited for.
func FollowChain(ctx context.Context, js jetstream.JetStream, runID string, w io.Writer, opts ...ReadOption) (ChainInfo, error) {
	return readChain(ctx, js, runID, w, true, opts)
}

func readChain(ctx context.Context, js jetstream.JetStream, runID string, w io.Writer, follow bool, opts []ReadOption) (ChainInfo, error) {
	var info ChainInfo
	if err := checkRunID(runID); err != nil {
		return info, err
	}
	stream, err := js.Stream(ctx, StreamChains)
	if err != nil {
		return info, fmt.Errorf("read the chain of run %s: stream %s: %w", runID, StreamChains, err)
	}
	subject := ChainSubject(runID)
	var stopAt uint64
	if !follow {
		last, err := stream.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return info, fmt.Errorf("stream %s holds no chain of run %s: check the run id (ralph runs --nats URL lists them)", StreamChains, runID)
		}
		if err != nil {
			return info, fmt.Errorf("read the chain of run %s: %w", runID, err)
		}
		stopAt = last.Sequence
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return info, fmt.Errorf("read the chain of run %s: %w", runID, err)
	}
	msgs, err := cons.Messages()
	if err != nil {
		return info, fmt.Errorf("read the chain of run %s: %w", runID, err)
	}
	defer msgs.Stop()
	seg := newSegmenter(runID, w, &info)
	for _, o := range opts {
		o(seg)
	}
	for follow || info.LastStreamSeq < stopAt {
		m, err := msgs.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return info, fmt.Errorf("read the chain of run %s: %w", runID, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return info, fmt.Errorf("read the chain of run %s: %w", runID, err)
		}
		info.LastStreamSeq = meta.Sequence.Stream
		h := m.Headers()
		if err := seg.add(chainMsg{streamSeq: meta.Sequence.Stream, msgID: h.Get(jetstream.MsgIDHeader),
			seq: h.Get(HeaderSeq), from: h.Get(HeaderFrom), data: m.Data(),
			certWorker: h.Get(HeaderCertWorker), certSig: h.Get(HeaderCertSig)}); err != nil {
			return info, err
		}
		if follow {
			if info.Ended {
				break
			}
			if meta.NumPending == 0 {
				if err := seg.w.Flush(); err != nil {
					return info, err
				}
			}
		}
	}
	return info, seg.finish()
}

// nameLine names the stream message a bundle error's line came from.
func (ci *ChainInfo) nameLine(runID string, err error) error {
	var be *ledger.BundleError
	if !errors.As(err, &be) || be.Line < 2 || be.Line-2 >= len(ci.lines) {
		return fmt.Errorf("the chain of run %s in stream %s does not verify: %w", runID, StreamChains, err)
	}
	ref := ci.lines[be.Line-2]
	what := kindName(ref.kind) + " " + strconv.FormatUint(ref.seq, 10)
	if ref.streamSeq == 0 {
		return fmt.Errorf("the chain of run %s in stream %s does not verify: line %d (its %s): %s", runID, StreamChains, be.Line, what, be.Msg)
	}
	return fmt.Errorf("the chain of run %s in stream %s does not verify: line %d (%s, message %d of the stream): %s", runID, StreamChains, be.Line, what, ref.streamSeq, be.Msg)
}

// readVerified streams ReadChain into consume (ReadBundle or
// ImportBundle), and names the message a verification error came from.
func readVerified(ctx context.Context, js jetstream.JetStream, runID string, consume func(io.Reader) error, opts []ReadOption) (ChainInfo, error) {
	pr, pw := io.Pipe()
	type result struct {
		info ChainInfo
		err  error
	}
	done := make(chan result, 1)
	go func() {
		info, err := ReadChain(ctx, js, runID, pw, opts...)
		pw.CloseWithError(err)
		done <- result{info, err}
	}()
	err := consume(pr)
	pr.CloseWithError(errReaderStopped)
	res := <-done
	if res.err != nil && !errors.Is(res.err, errReaderStopped) {
		return res.info, res.err
	}
	if err != nil {
		// The reader refused a line: ReadChain stopped because of it.
		return res.info, res.info.nameLine(runID, err)
	}
	return res.info, res.err
}

// errReaderStopped is what ReadChain's writes get once the bundle's reader
// refused a line: the reader's error is the one to report.
var errReaderStopped = errors.New("the bundle reader stopped")

// VerifyChain reads run runID's chain from the stream and verifies it as a
// bundle; pinned, when not empty, are the verifier keys to trust (every
// segment's key must be one of them).
func VerifyChain(ctx context.Context, js jetstream.JetStream, runID string, pinned []string, opts ...ReadOption) (ledger.BundleReport, ChainInfo, error) {
	var rep ledger.BundleReport
	info, err := readVerified(ctx, js, runID, func(r io.Reader) error {
		var err error
		rep, err = ledger.ReadBundle(ctx, r, pinned, nil)
		return err
	}, opts)
	return rep, info, err
}

// RebuildStore reads run runID's chain from the stream, verifies it and
// imports it into a new store opened with opts (opts.Dir, which must be
// new or empty, for a worker resuming the run; InMemory for a reader):
// every action keeps its seq, action hash and chain hash. pinned, when not
// empty, are the verifier keys to trust. On an error nothing is left: the
// store is closed and its directory removed.
func RebuildStore(ctx context.Context, js jetstream.JetStream, runID string, opts ledger.Options, pinned []string, ropts ...ReadOption) (*ledger.Store, ChainInfo, error) {
	if opts.Dir != "" {
		if entries, err := os.ReadDir(opts.Dir); err == nil && len(entries) > 0 {
			return nil, ChainInfo{}, fmt.Errorf("rebuild the chain of run %s into %s: the directory is not empty; a chain is rebuilt into a new store", runID, opts.Dir)
		}
	}
	st, err := ledger.Open(opts)
	if err != nil {
		return nil, ChainInfo{}, fmt.Errorf("rebuild the chain of run %s: %w", runID, err)
	}
	info, err := readVerified(ctx, js, runID, func(r io.Reader) error {
		_, _, err := st.ImportBundle(ctx, r, pinned)
		return err
	}, ropts)
	if err != nil {
		keyPath := st.KeyPath()
		st.Close()
		if opts.Dir != "" {
			os.RemoveAll(opts.Dir)
			if keyPath != "" && opts.KeyFile == "" && opts.PrivateKey == nil {
				// The key this discarded store made for itself.
				os.Remove(keyPath)
			}
		}
		return nil, info, err
	}
	return st, info, nil
}
