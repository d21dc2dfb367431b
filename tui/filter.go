package tui

import (
	"strings"
	"unicode/utf8"
)

// filter selects chain rows. Its text is words separated by spaces, all of
// which must match:
//
//	type:call     the action type contains "call" (CapabilityCall, …)
//	fn:shell      the function, step or capability name contains "shell"
//	is:failed     the row failed, or is a call that reported failure (also is:ok, is:running,
//	              is:cancelled, is:skipped)
//	anything      the row's text (type, name, error, details) contains it
//
// Matching ignores case.
type filter struct {
	raw    string
	types  []string
	fns    []string
	words  []string
	status []status
}

func parseFilter(s string) *filter {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	f := &filter{raw: s}
	for _, w := range strings.Fields(s) {
		switch {
		case strings.HasPrefix(w, "type:") && len(w) > 5:
			f.types = append(f.types, w[5:])
		case strings.HasPrefix(w, "fn:") && len(w) > 3:
			f.fns = append(f.fns, w[3:])
		case w == "is:failed":
			f.status = append(f.status, stFailed)
		case w == "is:ok":
			f.status = append(f.status, stOK)
		case w == "is:running":
			f.status = append(f.status, stRunning)
		case w == "is:cancelled":
			f.status = append(f.status, stCancelled)
		case w == "is:skipped":
			f.status = append(f.status, stSkipped)
		default:
			f.words = append(f.words, w)
		}
	}
	return f
}

// dependsOnStatus reports whether a row's match can change when it closes.
func (f *filter) dependsOnStatus() bool { return len(f.status) > 0 }

func (f *filter) match(t *tree, idx int32) bool {
	n := t.at(idx)
	for _, st := range f.status {
		if n.st != st && (st != stFailed || n.st != stReported) && (st != stOK || n.st != stUnmet) {
			return false
		}
	}
	typ := n.typ.String()
	for _, x := range f.types {
		if !containsFold(typ, x) {
			return false
		}
	}
	for _, x := range f.fns {
		if !containsFold(n.label, x) {
			return false
		}
	}
	if len(f.words) == 0 {
		return true
	}
	note := t.notes[idx]
	for _, x := range f.words {
		if !containsFold(n.label, x) && !containsFold(typ, x) && !containsFold(note, x) {
			return false
		}
	}
	return true
}

// containsFold reports whether sub occurs in s, ignoring case, without
// allocating.
func containsFold(s, sub string) bool {
	if sub == "" {
		return true
	}
	n := len(sub)
	for i := 0; i+n <= len(s); {
		if strings.EqualFold(s[i:i+n], sub) {
			return true
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return false
}
