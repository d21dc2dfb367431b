package serve

import (
	"bufio"
	"io"

	"github.com/ralphloop/ralph/ledger"
)

// How ralph chain export writes a store's actions, whichever reader holds it.

// ExportBundle writes the whole store as a bundle (ledger.ExportBundle),
// from the store or from the process holding it: there, up to a signed
// checkpoint while appends go on.
func ExportBundle(st Reader, out io.Writer) error {
	w := bufio.NewWriter(out)
	if _, err := st.ExportBundle(w); err != nil {
		return err
	}
	return w.Flush()
}

// Export writes the actions f selects as JSON lines (ledger.Store.Export's
// form), from a store or from the process holding it.
func Export(st Reader, w io.Writer, f ledger.Filter) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var buf []byte
	err := st.Select(f, func(a ledger.Action) error {
		buf = append(ledger.AppendJSON(buf[:0], &a), '\n')
		_, err := bw.Write(buf)
		return err
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}
