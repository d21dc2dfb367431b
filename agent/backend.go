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

// Facts are what other packages know of a CLI without running it: one
// row's worth (DESIGN §21), read through Lookup and never by comparing a
// CLI's name outside this package.
type Facts struct {
	Name string
	// Auto: "auto" tries it, in the table's order (the CLIs ralph runs
	// itself; not "command").
	Auto bool
	// TakesCommand: it runs [agent] command, any program, instead of a CLI
	// of its own.
	TakesCommand bool
	// ReportsCost: it reports its own cost in USD (a max_cost can fire
	// with no price); ReportsTokens: it reports tokens a price can turn
	// into a cost.
	ReportsCost, ReportsTokens bool
	// DefaultModel is the model it runs unless its args name one, as far
	// as ralph can know before a call ("" when it cannot).
	DefaultModel string
	// InitModel is the model `ralph init` names in its args: for a CLI
	// that reports tokens but no cost and whose default model cannot be
	// known before the call, so that the max_cost init writes can fire.
	InitModel string
	// ExampleModel is a model of the price table it runs, named in the fix
	// of a max_cost that can never fire.
	ExampleModel string
	// StateDirs are the directories (and files) it keeps its own state
	// in, for a home and an environment: a sandbox lets it write them
	// (agent.StateDirs). nil: none.
	StateDirs func(home string, env Env) []string
	// StateFiles are those of StateDirs' paths that are files, each with
	// the document it starts as (Claude's ~/.claude.json: "{}"): a
	// sandbox makes a missing one so, where a directory in its place
	// would break the CLI. nil: all are directories.
	StateFiles func(home string, env Env) map[string]string
	// APIHosts are the hosts it reaches for its model, "host" (port 443)
	// or "host:port": what a sandbox's proxy lets it reach.
	APIHosts []string
	// BaseURLEnv are the variables that point it at another endpoint
	// (ANTHROPIC_BASE_URL, …): their hosts are reachable too.
	BaseURLEnv []string
	// ConfigHosts are the hosts its own user configuration points it at
	// (a model provider configured there), for a home and an
	// environment; nil: it reads no such configuration.
	ConfigHosts func(home string, env Env) []string
}

// backend is one CLI: its facts, how to call it and how to read what it
// prints.
type backend struct {
	Facts
	bin string // the executable Resolve looks up on PATH
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
	// confined are the arguments ralph adds to a call of the CLI when its
	// own sandbox confines the call (given the call's args, and the home
	// and environment it runs with): its own sandbox turned off where it
	// cannot work inside ralph's, its traffic to hosts ralph's proxy
	// refuses anyway turned off. nil: none.
	confined func(args []string, home string, env Env) []string
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

// backends is the one table of the agent CLIs: those ralph runs itself,
// in the order "auto" tries them, then "command", which runs any program.
// Adding a CLI is one entry here and its backend (its facts, argv, parser,
// permissions): see doc.go.
var backends = []func() backend{claudeBackend, codexBackend, geminiBackend, opencodeBackend, commandBackend}

// CLIs are the names of the agent CLIs ralph runs itself, in the order
// "auto" tries them ("command" runs any other program).
func CLIs() []string {
	var out []string
	for _, mk := range backends {
		if b := mk(); b.Auto {
			out = append(out, b.Name)
		}
	}
	return out
}

// IsCLI says whether name is one of CLIs.
func IsCLI(name string) bool {
	f, ok := Lookup(name)
	return ok && f.Auto
}

// Lookup is the facts of the backend called name.
func Lookup(name string) (Facts, bool) {
	b := backendFor(name)
	return b.Facts, b.Name != ""
}

// TakesCommand says whether cli runs [agent] command (see Facts).
func TakesCommand(cli string) bool { return backendFor(cli).TakesCommand }

// backendFor returns the backend called name; the zero backend when there
// is none.
func backendFor(name string) backend {
	for _, mk := range backends {
		if b := mk(); b.Name == name {
			return b
		}
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
