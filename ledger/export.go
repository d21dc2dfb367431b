package ledger

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
// is written. Blank lines are skipped.
//
// An import larger than one transaction is committed in several; only an
// I/O failure between them can leave part of it recorded, and the error
// then says how much.
func (s *Store) Import(ctx context.Context, r io.Reader) (ImportReport, error) {
	var (
		items  []*pending
		lineOf = make(map[string]int)
	)
	br := bufio.NewReaderSize(r, 1<<20)
	for line := 1; ; line++ {
		b, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return ImportReport{}, fmt.Errorf("line %d: %w", line, err)
		}
		if len(bytes.TrimSpace(b)) > 0 {
			p, perr := s.importLine(b)
			if perr != nil {
				return ImportReport{}, fmt.Errorf("line %d: %w", line, perr)
			}
			if prev, ok := lineOf[p.a.ActionID]; ok {
				return ImportReport{}, fmt.Errorf("line %d: action_id %s already appears on line %d", line, p.a.ActionID, prev)
			}
			lineOf[p.a.ActionID] = line
			items = append(items, p)
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if len(items) == 0 {
		return ImportReport{}, nil
	}
	req := &request{items: items, done: make(chan struct{})}
	if err := s.submit(ctx, req); err != nil {
		var dup *DuplicateError
		if errors.As(err, &dup) {
			return ImportReport{}, fmt.Errorf("line %d: %w", lineOf[dup.ActionID], err)
		}
		return ImportReport{}, fmt.Errorf("import: %w", err)
	}
	return ImportReport{Actions: len(items), FirstSeq: req.res[0].Seq, LastSeq: req.res[len(items)-1].Seq}, nil
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
