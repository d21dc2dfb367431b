package tui

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/ledger"
)

// outputTailBytes and outputTailLines bound what the detail view reads of
// a call's output file: its end, never the whole.
const (
	outputTailBytes = 32 << 10
	outputTailLines = 40
)

// callOutput is the end of the output file a call recorded (an agent's
// printout), as the detail view shows it.
type callOutput struct {
	rel    string // output_file as recorded, relative to the store
	path   string // where it was read ("" when the store's directory is unknown)
	bytes  int64  // output_bytes as recorded
	sha256 string
	size   int64    // the file's size now
	lines  []string // its last lines
	err    error
}

// readCallOutput reads the end of a's output file from the store in dir;
// nil when a recorded none.
func readCallOutput(a *ledger.Action, dir string) *callOutput {
	rel := a.Metadata["output_file"].Str()
	if rel == "" {
		return nil
	}
	o := &callOutput{rel: rel, sha256: a.Metadata["output_sha256"].Str()}
	o.bytes, _ = strconv.ParseInt(a.Metadata["output_bytes"].Str(), 10, 64)
	if dir == "" {
		o.err = fmt.Errorf("the file is in the store that ran the call, not here; ralph view %s --output %s prints it there", a.RunID, a.ActionID)
		return o
	}
	o.path = rel
	if !filepath.IsAbs(rel) {
		o.path = filepath.Join(dir, filepath.FromSlash(rel))
	}
	f, err := os.Open(o.path)
	if err != nil {
		o.err = err
		return o
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		o.err = err
		return o
	}
	o.size = fi.Size()
	from := max(0, o.size-outputTailBytes)
	b := make([]byte, o.size-from)
	if _, err := f.ReadAt(b, from); err != nil && err != io.EOF {
		o.err = err
		return o
	}
	if from > 0 { // the first line read is only the end of one
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	lines := strings.Split(strings.TrimRight(strings.ToValidUTF8(string(b), "\uFFFD"), "\n"), "\n")
	if len(lines) > outputTailLines {
		lines = lines[len(lines)-outputTailLines:]
	}
	for i, l := range lines {
		lines[i] = clean(l)
	}
	o.lines = lines
	return o
}

// outputSection is the detail view's "output" section: the file, its
// size and digest as recorded, and its last lines.
func (d *detailView) outputSection(o *callOutput, field func(name, value string), out *[]string) {
	st := d.st
	*out = append(*out, "", st.bold.Render("output"))
	shown := o.rel
	if o.path != "" {
		shown = o.path
	}
	field("file", shown)
	field("recorded", fmt.Sprintf("%d bytes, sha256 %s", o.bytes, o.sha256))
	if o.err != nil {
		field("read", st.fail.Render("✗ "+o.err.Error()))
		return
	}
	if o.size != o.bytes {
		field("read", st.fail.Render(fmt.Sprintf("✗ the file has %d bytes, the record says %d", o.size, o.bytes)))
	}
	if len(o.lines) == 0 || (len(o.lines) == 1 && o.lines[0] == "") {
		*out = append(*out, st.dim.Render("(empty)"))
		return
	}
	if o.size > outputTailBytes {
		*out = append(*out, st.dim.Render(fmt.Sprintf("… its last %d lines; ralph view --output prints it whole", len(o.lines))))
	}
	for _, l := range o.lines {
		*out = append(*out, "  "+l)
	}
}
