package arbiter

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

var irLineCol = regexp.MustCompile(`^\d+:\d+$`)

// Listing is every problem of the IR document name, one per line, each as
// name:line:col: message; fix (or name: path: message; fix where the
// problem has a JSON path rather than a position).
func (e *IRError) Listing(name string) string {
	lines := make([]string, 0, len(e.Diagnostics))
	for _, d := range e.Diagnostics {
		msg := d.Message
		if d.Fix != "" {
			msg += "; " + d.Fix
		}
		switch {
		case irLineCol.MatchString(d.Pos):
			lines = append(lines, fmt.Sprintf("%s:%s: %s", name, d.Pos, msg))
		case d.Pos != "":
			lines = append(lines, fmt.Sprintf("%s: %s: %s", name, d.Pos, msg))
		default:
			lines = append(lines, fmt.Sprintf("%s: %s", name, msg))
		}
	}
	return strings.Join(lines, "\n")
}

// Offline is a model that refuses every call: it stands in for the
// configured model where a command reads capability specs and runs
// nothing (ralph ir, ralph plan --check).
type Offline struct{}

// Name names the stand-in.
func (Offline) Name() string { return "offline" }

// Complete refuses the call.
func (Offline) Complete(context.Context, Completion, Observer) (Reply, error) {
	return Reply{}, errors.New("no model is consulted here")
}
