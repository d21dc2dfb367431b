package e2e

import (
	"errors"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func readAll(t testing.TB, stream string) []SSEEvent {
	var got []SSEEvent
	if err := ReadSSE(strings.NewReader(stream), func(e SSEEvent) bool { got = append(got, e); return true }); err != nil {
		t.Fatalf("ReadSSE(%q): %v", stream, err)
	}
	return got
}

// The cases of WHATWG HTML §9.2.5–9.2.6 (parsing and interpreting an
// event stream), and its examples.
func TestReadSSE(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, stream string
		want         []SSEEvent
	}{
		{"two data lines", "data: YHOO\ndata: +2\ndata: 10\n\n", []SSEEvent{{Type: "message", Data: "YHOO\n+2\n10"}}},
		{"typed, with ids that last", "event: add\nid: 1\ndata: 73857293\n\nevent: remove\ndata: 2153\n\n",
			[]SSEEvent{{Type: "add", Data: "73857293", ID: "1"}, {Type: "remove", Data: "2153", ID: "1"}}},
		{"comments and unknown fields", ": test stream\nfoo: bar\ndata: first event\nid: 1\n\n:\ndata:second event\nid\n\n",
			[]SSEEvent{{Type: "message", Data: "first event", ID: "1"}, {Type: "message", Data: "second event"}}},
		{"one space only is dropped", "data:test\n\ndata: test\n\ndata:  two\n\n",
			[]SSEEvent{{Type: "message", Data: "test"}, {Type: "message", Data: "test"}, {Type: "message", Data: " two"}}},
		{"empty data lines", "data\ndata\n\ndata:\n\n", []SSEEvent{{Type: "message", Data: "\n"}, {Type: "message", Data: ""}}},
		{"no data, no event", "event: x\nid: 7\n\n\ndata: d\n\n", []SSEEvent{{Type: "message", Data: "d", ID: "7"}}},
		{"CR, CRLF and a BOM", "\uFEFFdata: a\r\rdata: b\r\n\r\n", []SSEEvent{{Type: "message", Data: "a"}, {Type: "message", Data: "b"}}},
		{"an id with NUL is ignored", "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", []SSEEvent{{Type: "message", Data: "a", ID: "1"}, {Type: "message", Data: "b", ID: "1"}}},
		{"retry", "retry: 1500\nretry: x\nretry: -1\ndata: a\n\n", []SSEEvent{{Type: "message", Data: "a", Retry: 1500 * time.Millisecond}}},
		{"unfinished event dropped", "data: a\n\ndata: b\n", []SSEEvent{{Type: "message", Data: "a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readAll(t, tc.stream)
			if len(got) != len(tc.want) {
				t.Fatalf("%q: %d events %+v, want %+v", tc.stream, len(got), got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("%q: event %d %+v, want %+v", tc.stream, i, got[i], tc.want[i])
				}
			}
			// Read a byte at a time: a line end split across reads (CR, then LF) is one.
			var bytewise []SSEEvent
			if err := ReadSSE(iotest.OneByteReader(strings.NewReader(tc.stream)), func(e SSEEvent) bool { bytewise = append(bytewise, e); return true }); err != nil || len(bytewise) != len(got) {
				t.Errorf("%q a byte at a time: %v, %+v", tc.stream, err, bytewise)
			}
		})
	}
}

// fn stops the reading; a failing reader's error is returned.
func TestReadSSEStopsAndFails(t *testing.T) {
	t.Parallel()
	n := 0
	if err := ReadSSE(strings.NewReader("data: 1\n\ndata: 2\n\n"), func(SSEEvent) bool { n++; return false }); err != nil || n != 1 {
		t.Errorf("stopped after %d events (%v), want 1", n, err)
	}
	boom := errors.New("boom")
	if err := ReadSSE(iotest.ErrReader(boom), func(SSEEvent) bool { return true }); !errors.Is(err, boom) {
		t.Errorf("a failing reader: %v", err)
	}
}

// Any stream reads without a panic, and whole or a byte at a time gives
// the same events.
func FuzzReadSSE(f *testing.F) {
	for _, s := range []string{"data: a\n\n", "event: e\r\nid: 1\r\ndata: x\r\ndata: y\r\n\r\n", ":c\rdata\r\r", "\uFEFFretry: 10\ndata: z\n\n", "data: unfinished"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var whole, bytewise []SSEEvent
		if err := ReadSSE(strings.NewReader(s), func(e SSEEvent) bool { whole = append(whole, e); return true }); err != nil {
			t.Fatal(err)
		}
		if err := ReadSSE(iotest.OneByteReader(strings.NewReader(s)), func(e SSEEvent) bool { bytewise = append(bytewise, e); return true }); err != nil {
			t.Fatal(err)
		}
		if len(whole) != len(bytewise) {
			t.Fatalf("%q: %d events whole, %d a byte at a time", s, len(whole), len(bytewise))
		}
		for i := range whole {
			if whole[i] != bytewise[i] || whole[i].Type == "" {
				t.Fatalf("%q: event %d %+v whole, %+v a byte at a time", s, i, whole[i], bytewise[i])
			}
		}
	})
}
