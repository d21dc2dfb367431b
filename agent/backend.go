package agent

import (
	"strings"
	"time"
)

// A parser turns one CLI's output into events, one line at a time, in the
// order the lines arrived. It keeps whatever state the format needs (for
// example which message's usage was already counted). It never fails: a
// line it does not understand becomes an EventRaw.
type parser interface {
	// line handles one complete line, without its newline. b is only valid
	// during the call.
	line(b []byte, emit func(Event))
}

// An ender is a parser that holds output back (a line of text not yet
// ended); end emits it when the output ends, however the call ended.
type ender interface {
	end(emit func(Event))
}

// backend is one CLI: how to call it and how to read what it prints.
type backend struct {
	name string
	bin  string // the executable Resolve looks up on PATH
	// argv builds the command line (path is the resolved binary); the
	// prompt goes on stdin when stdin is true, else argv carries it.
	argv  func(path string, o *Options) []string
	stdin bool
	// newParser makes a parser for one call; now is the clock for resets
	// given as a time of day.
	newParser func(now func() time.Time) parser
	// limitText recognises an account limit in free text (stderr or an
	// error message); nil when the CLI prints none we know.
	limitText func(s string, now time.Time) *Limit
	// stderrLine reads one line of standard error as it arrives: it emits
	// what it recognises (a retry notice as EventRetry) and reports
	// whether the line was such a notice, which the limit check at the
	// call's end then leaves out. nil: standard error is only kept.
	stderrLine func(line string, emit func(Event)) bool
	// argsDenial is the refusal a call's arguments make certain (a
	// read-only mode: the CLI cannot edit, whatever the model does), or
	// nil; Run reports it when the call reported no denial of its own.
	// nil: the CLI has no such mode.
	argsDenial func(args []string) *Denial
	// permissions are the arguments and environment the CLI needs to edit
	// files in its working directory and run test (the argv of the test
	// command) headless, or, with full, its bypass of every check; nil
	// when the CLI asks for none.
	permissions func(test []string, full bool) Permissions
}

// Permissions are what `ralph init` writes into [agent] so that the CLI can
// work headless: Args for [agent] args, Env ("NAME=value") for [agent] env,
// and Comment, one line per element, saying what they allow.
type Permissions struct {
	Args    []string
	Env     []string
	Comment []string
}

// PermissionsFor returns cli's permissions for a loop whose test command
// is test (full: the CLI's bypass flag instead); the zero Permissions for a
// CLI that needs none or is unknown.
func PermissionsFor(cli string, test []string, full bool) Permissions {
	b := backendFor(cli)
	if b.permissions == nil {
		return Permissions{}
	}
	return b.permissions(test, full)
}

// cliBackends is the one table of the coding agent CLIs ralph runs itself,
// in the order "auto" tries them. Adding a CLI is one entry here and its
// backend (argv, parser, permissions): see doc.go.
var cliBackends = []struct {
	name string
	make func() backend
}{
	{"claude", claudeBackend},
	{"codex", codexBackend},
	{"gemini", geminiBackend},
	{"opencode", opencodeBackend},
}

// CLIs are the names of the agent CLIs ralph runs itself, in the order
// "auto" tries them ("command" runs any other program).
func CLIs() []string {
	out := make([]string, len(cliBackends))
	for i, c := range cliBackends {
		out[i] = c.name
	}
	return out
}

// IsCLI says whether name is one of CLIs.
func IsCLI(name string) bool {
	for _, c := range cliBackends {
		if c.name == name {
			return true
		}
	}
	return false
}

// backendFor returns the backend called name; the zero backend when there
// is none.
func backendFor(name string) backend {
	for _, c := range cliBackends {
		if c.name == name {
			return c.make()
		}
	}
	if name == "command" {
		return commandBackend()
	}
	return backend{}
}

// argValue is the value args give flag last ("--flag V" or "--flag=V"),
// or "": the CLIs read the last one.
func argValue(args []string, flag string) string {
	v := ""
	for i, a := range args {
		switch {
		case a == flag && i+1 < len(args):
			v = args[i+1]
		case strings.HasPrefix(a, flag+"="):
			v = strings.TrimPrefix(a, flag+"=")
		}
	}
	return v
}
