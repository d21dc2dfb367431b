package ledger

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Filter selects actions for Export and Select. Empty fields match
// everything; set fields must all match.
type Filter struct {
	RunID    string
	PlanID   string
	IntentID string
	FromSeq  uint64
}

func (f Filter) match(a *Action) bool {
	return (f.RunID == "" || a.RunID == f.RunID) &&
		(f.PlanID == "" || a.PlanID == f.PlanID) &&
		(f.IntentID == "" || a.IntentID == f.IntentID) &&
		a.Seq >= f.FromSeq
}

// Select calls fn for every action f matches, in seq order, using an index
// when f names a run, plan or intent.
func (s *Store) Select(f Filter, fn func(Action) error) error {
	var (
		list []Action
		err  error
	)
	switch {
	case f.RunID != "":
		list, err = s.ByRun(f.RunID)
	case f.PlanID != "":
		list, err = s.ByPlan(f.PlanID)
	case f.IntentID != "":
		list, err = s.ByIntent(f.IntentID)
	default:
		return s.Range(f.FromSeq, fn)
	}
	if err != nil {
		return err
	}
	for i := range list {
		if f.match(&list[i]) {
			if err := fn(list[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Export writes the actions f matches to w as JSON lines, in seq order, and
// returns how many it wrote.
func (s *Store) Export(w io.Writer, f Filter) (int, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	n := 0
	var buf []byte
	err := s.Select(f, func(a Action) error {
		buf = append(AppendJSON(buf[:0], &a), '\n')
		n++
		_, err := bw.Write(buf)
		return err
	})
	if err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// ImportReport says what Import recorded.
type ImportReport struct {
	Actions  int
	FirstSeq uint64 // 0 when nothing was imported
	LastSeq  uint64
}

// maxImportLine bounds one JSON line (a whole action).
const maxImportLine = 64 << 20

// Import reads JSON lines (the Export form), validates every line, and then
// appends all of them in order as one writer request: they get consecutive
// seqs after the current head, new hashes and new checkpoints signed by this
// store's key. The seq, hashes and checkpoint_seq on the lines are ignored.
// Any bad line (the error names its number), a duplicate action_id, or an
// action too large for a transaction rejects the whole input before anything
// is written. Blank lines are skipped. Import holds the whole input in
// memory; ImportStream does not. Both are all or nothing, even if the
// process is killed (see importmark.go): an import that fails after writing
// refuses further appends, and the next Open rolls it back.
func (s *Store) Import(ctx context.Context, r io.Reader) (ImportReport, error) {
	return s.importJSON(ctx, r, 0)
}

// importChunk is how many actions a streaming import hands the writer at
// a time.
const importChunk = 4096

// ImportStream is Import in bounded memory: it appends the lines in chunks
// as it reads them, after recording the head it starts from. When the
// whole input is committed the record is deleted, and only then is the
// import complete. A bad line, an error or a crash before that leaves the
// record, and the store refuses appends until it is reopened: Open rolls
// the chunks back. No other appends should run during an import; they
// would be rolled back with it.
func (s *Store) ImportStream(ctx context.Context, r io.Reader) (ImportReport, error) {
	return s.importJSON(ctx, r, importChunk)
}

// importJSON imports JSON lines, handing the writer chunk actions at a
// time (all of them at the end when chunk is 0).
func (s *Store) importJSON(ctx context.Context, r io.Reader, chunk int) (ImportReport, error) {
	var marked bool
	start := s.Head()
	rep, err := s.importLines(ctx, r, chunk, &marked)
	if !marked {
		return rep, err
	}
	if err != nil && s.Head() == start {
		// Nothing was committed: the mark alone goes.
		if eerr := s.endImport(); eerr != nil {
			s.abandonImport()
		}
		return ImportReport{}, err
	}
	if err == nil {
		err = s.endImport()
	}
	if err != nil {
		s.abandonImport()
		return ImportReport{}, fmt.Errorf("%w (the store rolls back what the import wrote when it is next opened)", err)
	}
	return rep, nil
}

// importLines does importJSON's work, setting *marked once it has recorded
// the head it started from.
func (s *Store) importLines(ctx context.Context, r io.Reader, chunk int, marked *bool) (ImportReport, error) {
	if chunk > 0 {
		defer s.releaseWhileImporting()()
	}
	var (
		rep    ImportReport
		items  []*pending
		lineOf = make(map[string]int)
	)
	flush := func() error {
		if len(items) == 0 {
			return nil
		}
		if !*marked {
			if err := s.beginImport(); err != nil {
				return err
			}
			*marked = true
		}
		req := &request{items: items, done: make(chan struct{})}
		if err := s.submit(ctx, req); err != nil {
			var dup *DuplicateError
			if errors.As(err, &dup) {
				return fmt.Errorf("line %d: %w", lineOf[dup.ActionID], err)
			}
			return fmt.Errorf("import: %w", err)
		}
		if rep.FirstSeq == 0 {
			rep.FirstSeq = req.res[0].Seq
		}
		rep.Actions += len(items)
		rep.LastSeq = req.res[len(items)-1].Seq
		items = nil
		clear(lineOf)
		return nil
	}
	br := bufio.NewReaderSize(r, 1<<20)
	for line := 1; ; line++ {
		b, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return rep, fmt.Errorf("line %d: %w", line, err)
		}
		if len(bytes.TrimSpace(b)) > 0 {
			p, perr := s.importLine(b)
			if perr != nil {
				return rep, fmt.Errorf("line %d: %w", line, perr)
			}
			if prev, ok := lineOf[p.a.ActionID]; ok {
				return rep, fmt.Errorf("line %d: action_id %s already appears on line %d", line, p.a.ActionID, prev)
			}
			lineOf[p.a.ActionID] = line
			items = append(items, p)
			if chunk > 0 && len(items) >= chunk {
				if err := flush(); err != nil {
					return rep, err
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
	}
	return rep, flush()
}

// releaseWhileImporting drops the pages of the store's memory-mapped files
// from this process every releaseEvery until stop is called: Badger writes
// and compacts tables through mappings, so without it every table a large
// import writes stays counted in the process's resident memory (see
// ReleaseMapped). The pages stay in the page cache.
func (s *Store) releaseWhileImporting() (stop func()) {
	if s.dir == "" {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer s.recoverBackground("import page release")
		t := time.NewTicker(releaseEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				// A hint only; a failure costs memory, not data.
				_ = s.ReleaseMapped()
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

const releaseEvery = 50 * time.Millisecond

// ImportBundle verifies a bundle (ReadBundle, with pinned as the keys to
// trust when set) and appends its actions with their exact canonical
// encodings, in chunks, so every action keeps its action hash and chain
// hash: the store must be empty. New checkpoints are signed with this
// store's key. A bundle that fails verification leaves the chunks before
// the failure committed: import into a new store that is discarded on
// error (ralph chain import does).
func (s *Store) ImportBundle(ctx context.Context, r io.Reader, pinned []string) (ImportReport, BundleReport, error) {
	var rep ImportReport
	if h := s.Head(); h.Seq != 0 {
		return rep, BundleReport{}, fmt.Errorf("ledger store %s already holds %d actions; a bundle is imported into a new store, where every action keeps its seq and hashes", s.describe(), h.Seq)
	}
	defer s.releaseWhileImporting()()
	var items []*pending
	var want []BundleAction // seq and hashes each item must keep
	flush := func() error {
		if len(items) == 0 {
			return nil
		}
		req := &request{items: items, done: make(chan struct{})}
		if err := s.submit(ctx, req); err != nil {
			return fmt.Errorf("import: %w", err)
		}
		for i, w := range want {
			if r := req.res[i]; r.Seq != w.Seq || r.ActionHash != w.Action.ActionHash || r.ChainHash != w.Action.ChainHash {
				return fmt.Errorf("import: action %d was stored as seq %d with other hashes", w.Seq, r.Seq)
			}
		}
		want = want[:0]
		if rep.FirstSeq == 0 {
			rep.FirstSeq = req.res[0].Seq
		}
		rep.Actions += len(items)
		rep.LastSeq = req.res[len(items)-1].Seq
		items = nil
		return nil
	}
	brep, err := ReadBundle(ctx, r, pinned, func(ba BundleAction) error {
		p, err := s.prepareEncoded(ba.Action, ba.Encoding)
		if err != nil {
			return &BundleError{Line: ba.Line, Msg: err.Error()}
		}
		items = append(items, p)
		want = append(want, BundleAction{Seq: ba.Seq, Action: &Action{ActionHash: ba.Action.ActionHash, ChainHash: ba.Action.ChainHash}})
		if len(items) >= importChunk {
			return flush()
		}
		return nil
	})
	if err != nil {
		return rep, brep, err
	}
	return rep, brep, flush()
}

func (s *Store) importLine(b []byte) (*pending, error) {
	var a Action
	if err := a.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	if a.ActionID == "" {
		return nil, errors.New(`"action_id" is missing or empty`)
	}
	a.Seq, a.ActionHash, a.ChainHash, a.CheckpointSeq = 0, Hash{}, Hash{}, 0
	return s.prepare(&a)
}

// readLine returns the next line without its newline; io.EOF comes with
// the last line.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxImportLine {
			return nil, fmt.Errorf("line is longer than %d bytes", maxImportLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}
