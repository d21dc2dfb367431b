package agent

import (
	"strings"
	"unicode/utf8"
)

const (
	// maxShort is the longest tool input summary or tool result kept in an event.
	maxShort = 200
	// maxRaw is the longest unknown line kept in an EventRaw.
	maxRaw = 4 << 10
)

// short makes s one line of at most maxShort bytes, cut on a rune
// boundary, with "…" when cut.
func short(s string) string { return cut(oneLine(s), maxShort) }

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if !strings.ContainsAny(s, "\r\n\t") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// rawEvent keeps a line the parser does not know as text.
func rawEvent(b []byte) Event {
	s := string(b)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return Event{Kind: EventRaw, Text: cut(s, maxRaw)}
}

// lastSession is the session id a parser reported last.
type lastSession string

// note emits EventSession when id names a session other than the last one
// reported.
func (s *lastSession) note(id string, emit func(Event)) {
	if id != "" && id != string(*s) {
		*s = lastSession(id)
		emit(Event{Kind: EventSession, SessionID: id})
	}
}
