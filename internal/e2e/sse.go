package e2e

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"strings"
	"time"
)

// SSEEvent is one event of a text/event-stream, as an EventSource
// dispatches it (WHATWG HTML §9.2.6, "Interpreting an event stream").
type SSEEvent struct {
	// Type is the event field's value, "message" when there was none.
	Type string
	// Data is the data lines joined by "\n".
	Data string
	// ID is the last event id when the event was dispatched: the latest
	// id field of the stream so far, this event's or an earlier one's.
	ID string
	// Retry is the latest reconnection time the stream set (0: none).
	Retry time.Duration
}

// maxSSELine bounds one line of a stream, so that a stream without line
// ends cannot grow a reader without bound.
const maxSSELine = 16 << 20

// ReadSSE reads the text/event-stream r and calls fn with each event it
// dispatches, until fn returns false, the stream ends, or r fails. It
// returns r's error (nil at the end of the stream or when fn stopped).
// As an EventSource does, it takes CR, LF and CRLF as line ends, drops a
// leading byte order mark, skips comments (":" lines) and unknown fields,
// dispatches no event whose data is empty, and drops an event the stream
// ended before its blank line.
func ReadSSE(r io.Reader, fn func(SSEEvent) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxSSELine)
	sc.Split(sseLines)
	var typ, id string
	var data strings.Builder
	var retry time.Duration
	first := true
	for sc.Scan() {
		line := sc.Text()
		if first {
			line, first = strings.TrimPrefix(line, "\uFEFF"), false
		}
		if line == "" { // dispatch
			if data.Len() > 0 {
				ev := SSEEvent{Type: typ, Data: strings.TrimSuffix(data.String(), "\n"), ID: id, Retry: retry}
				if ev.Type == "" {
					ev.Type = "message"
				}
				if !fn(ev) {
					return nil
				}
			}
			typ = ""
			data.Reset()
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			typ = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
		case "id":
			if !strings.ContainsRune(value, 0) {
				id = value
			}
		case "retry":
			if ms, err := strconv.ParseUint(value, 10, 63); err == nil {
				retry = time.Duration(min(ms, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond
			}
		}
	}
	return sc.Err()
}

// sseLines splits a stream at CRLF, LF or CR (a bufio.SplitFunc). A CR
// at the end of what has been read waits for the next byte, which may
// be its LF.
func sseLines(data []byte, atEOF bool) (int, []byte, error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0 && atEOF && len(data) > 0:
		return len(data), data, nil
	case i < 0:
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case atEOF:
		return i + 1, data[:i], nil
	}
	return 0, nil, nil // a CR last: its LF may follow
}
