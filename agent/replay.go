package agent

import (
	"bufio"
	"fmt"
	"io"
	"time"
)

// replayLineMax bounds one line of a replayed output (a line longer is
// cut: it becomes what the parser makes of its first bytes).
const replayLineMax = 4 << 20

// ParseOutput reads what CLI cli printed (an output file a call recorded,
// whole or as far as it was written) and emits the events its parser makes
// of it, as they were emitted while the call ran. An unknown cli is an
// error; a line the parser does not understand becomes an EventRaw.
func ParseOutput(cli string, r io.Reader, emit func(Event)) error {
	b := backendFor(cli)
	if b.newParser == nil {
		return fmt.Errorf("no parser for agent CLI %q", cli)
	}
	p := b.newParser(time.Now)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull { // a long line: gather it, bounded
			long := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				if len(long) < replayLineMax {
					long = append(long, line[:min(len(line), replayLineMax-len(long))]...)
				}
			}
			line = long
		}
		if len(line) > 0 {
			n := len(line)
			if line[n-1] == '\n' {
				n--
			}
			if n > 0 && line[n-1] == '\r' {
				n--
			}
			p.line(line[:n], emit)
		}
		switch {
		case err == io.EOF:
			if e, ok := p.(ender); ok {
				e.end(emit)
			}
			return nil
		case err != nil:
			return err
		}
	}
}
