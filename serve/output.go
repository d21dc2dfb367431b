package serve

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/internal/usage"
	"github.com/ralphloop/ralph/ledger"
)

// CallWithOutput finds the call of run runID that sel names and that
// recorded an output file: "last" (the run's last such call), a seq
// ("12" or "#12") or an action id or a unique prefix of one.
func CallWithOutput(st Reader, runID, sel string) (ledger.Action, error) {
	seq, bySeq := uint64(0), false
	if n, err := strconv.ParseUint(strings.TrimPrefix(sel, "#"), 10, 64); err == nil {
		seq, bySeq = n, true
	}
	var found []ledger.Action
	var calls int
	err := st.Range(1, func(a ledger.Action) error {
		if a.RunID != runID || a.Metadata["output_file"].Str() == "" {
			return nil
		}
		calls++
		switch {
		case sel == "last":
			found = append(found[:0], a)
		case bySeq && a.Seq == seq, a.ActionID == sel:
			found = append(found[:0], a)
			return errFound
		case !bySeq && strings.HasPrefix(a.ActionID, sel):
			found = append(found, a)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFound) {
		return ledger.Action{}, err
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		return ledger.Action{}, usage.Flagf("--output %q matches %d calls of run %s; give more of the action id", sel, len(found), runID)
	case calls == 0:
		return ledger.Action{}, usage.Flagf("run %s recorded no call with an output file (agent.run calls record one)", runID)
	}
	return ledger.Action{}, usage.Flagf("--output %q names none of the %d calls of run %s with an output file; use last, a seq or an action id from `ralph chain show --run %s`", sel, calls, runID, runID)
}

// CopyCallOutput copies the output file a recorded, whole, to w, and
// checks it against the size and SHA-256 on the record: a file that
// differs is an error after the copy.
func CopyCallOutput(w io.Writer, dir string, a ledger.Action) error {
	rel := a.Metadata["output_file"].Str()
	path := rel
	if !filepath.IsAbs(rel) {
		path = filepath.Join(dir, filepath.FromSlash(rel))
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read the output of call %s: %w; output files stay in the store of the machine that ran the call", a.ActionID, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), f)
	if err != nil {
		return fmt.Errorf("copy the output of call %s from %s: %w", a.ActionID, path, err)
	}
	want, _ := strconv.ParseInt(a.Metadata["output_bytes"].Str(), 10, 64)
	if sum := hex.EncodeToString(h.Sum(nil)); n != want || sum != a.Metadata["output_sha256"].Str() {
		return fmt.Errorf("%s has %d bytes with sha256 %s, but call %s recorded %d bytes with sha256 %s: the file was changed after the call",
			path, n, sum, a.ActionID, want, a.Metadata["output_sha256"].Str())
	}
	return nil
}
